// Saving a checkpoint: temporary directories and their cleanup, data files, and the publish
// protocol (core/checkpoint.hpp describes the layout and the order of the steps).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <bit>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <map>
#include <optional>
#include <set>

#include "core/checkpoint_internal.hpp"
#include "core/crc32c.hpp"

namespace troupe::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian and written as the host lays tensors out");

namespace {

namespace fs = std::filesystem;
using detail::Fd;
using detail::fail_errno;
using detail::join;

// The CRC is computed on a piece just before it is written, while it is still in the cache.
constexpr std::size_t kPieceBytes = std::size_t(1) << 20;
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kCheckpointPrefix = "ckpt-";

// The temporary entries this process is using now: a dead save of this very process (one that
// threw without abandon) is not in it, so begin_save may remove it although the pid is alive.
std::mutex live_mutex;  // guards live_names; takes no other lock
std::set<std::string> live_names;

void set_live(const std::string& name, bool live) {
  std::lock_guard lock(live_mutex);
  if (live) live_names.insert(name);
  else live_names.erase(name);
}

bool is_live(const std::string& name) {
  std::lock_guard lock(live_mutex);
  return live_names.count(name) > 0;
}

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return std::string("unknown");
    std::string s(buf);
    for (char& c : s)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    return s.empty() ? std::string("unknown") : s.substr(0, 64);
  }();
  return name;
}

// ".tmp-<kind>-<step>-<pid>-<random>-<host>"
std::string temp_name(const char* kind, int64_t step) {
  std::random_device rd;
  return fmt::format("{}{}-{}-{}-{:08x}-{}", kTempPrefix, kind, step, ::getpid(), uint32_t(rd()),
                     host_name());
}

struct TempName {
  long pid = 0;
  std::string host;
};

// Parses a temp_name(); nullopt for anything else (which cleanup then leaves alone).
std::optional<TempName> parse_temp_name(const std::string& name) {
  if (name.rfind(kTempPrefix, 0) != 0) return std::nullopt;
  // kind, step, pid and random hold no '-'; the host is the rest and may.
  std::size_t pos = std::char_traits<char>::length(kTempPrefix);
  std::string fields[4];
  for (auto& field : fields) {
    std::size_t dash = name.find('-', pos);
    if (dash == std::string::npos || dash == pos) return std::nullopt;
    field = name.substr(pos, dash - pos);
    pos = dash + 1;
  }
  if (pos >= name.size()) return std::nullopt;
  if (fields[2].find_first_not_of("0123456789") != std::string::npos || fields[2].size() > 9)
    return std::nullopt;
  return TempName{std::stol(fields[2]), name.substr(pos)};
}

bool process_alive(long pid) { return ::kill(pid_t(pid), 0) == 0 || errno == EPERM; }

// The cleanup rule of core/checkpoint.hpp: this host's entries whose process is gone, and this
// process's entries that it no longer uses.
void remove_dead_temporaries(const std::string& dir) {
  std::vector<std::string> dead;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    auto parsed = parse_temp_name(name);
    if (!parsed || parsed->host != host_name()) continue;
    bool ours = parsed->pid == long(::getpid());
    if (ours ? !is_live(name) : !process_alive(parsed->pid)) dead.push_back(name);
  }
  for (const auto& name : dead) fs::remove_all(join(dir, name), ec);
}

int64_t unix_ms_now() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The entry for one tensor to save, before its bytes are written (offset and crc32c unset).
IndexEntry entry_for(const SavedTensor& t, const std::string& file, const std::string& where) {
  TROUPE_CHECK_ARG(!t.name.empty(), "{}: a tensor to save has an empty name", where);
  TROUPE_CHECK_ARG(t.value.is_initialized() && t.value.dtype() != DType::invalid,
                   "{}: variable '{}' has no value to save", where, t.name);
  TROUPE_CHECK_ARG(t.value.host_accessible(),
                   "{}: variable '{}' is on {}; saving needs a host copy first", where, t.name,
                   t.value.device_name());
  const Shape& shape = t.value.shape();
  IndexEntry e;
  e.name = t.name;
  e.dtype = t.value.dtype();
  bool whole = t.full_shape.rank() == 0 && shape.rank() > 0;
  e.full_shape = whole ? shape : t.full_shape;
  e.row_begin = whole ? 0 : t.row_begin;
  e.rows = shape.rank() == 0 ? 1 : shape[0];
  bool rows_fit = shape.rank() == e.full_shape.rank();
  for (int i = 1; rows_fit && i < shape.rank(); ++i) rows_fit = shape[i] == e.full_shape[i];
  TROUPE_CHECK_ARG(rows_fit, "{}: variable '{}': a value of shape {} is not rows of its full shape {}",
                   where, t.name, shape.to_string(), e.full_shape.to_string());
  e.file = file;
  e.length = t.value.byte_size();
  detail::check_entry(e, where, ErrorCode::invalid_argument);
  return e;
}

// "ckpt-<step>": a published checkpoint's directory name.
std::string checkpoint_name(int64_t step) { return fmt::format("{}{}", kCheckpointPrefix, step); }

// Writes `path` (`replace`: over a file there; else it must not exist) holding `bytes`, fsynced
// and closed with its errors.
void write_synced_file(const std::string& path, const void* bytes, std::size_t size, bool replace) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | (replace ? O_TRUNC : O_EXCL) | O_CLOEXEC, 0644));
  if (!fd) fail_errno(errno, "creating " + path);
  detail::write_all(fd.get(), bytes, size, path);
  detail::fsync_fd(fd.get(), path);
  fd.close_checked(path);
}

// Removes the published checkpoint `path` of `step`: renamed to a temporary name first (one
// atomic step), so a kill never leaves a half-removed ckpt-<step>. Returns the rename's errno,
// 0 when it is gone.
int remove_published(const std::string& dir, const std::string& path, int64_t step) {
  std::string name = temp_name("drop", step);
  std::string aside = join(dir, name);
  set_live(name, true);
  int err = ::rename(path.c_str(), aside.c_str()) == 0 ? 0 : errno;
  std::error_code ec;
  if (err == 0) fs::remove_all(aside, ec);
  set_live(name, false);
  return err;
}

void write_pointer(const std::string& dir, int64_t step) {
  std::string temp = temp_name("pointer", step);
  std::string path = join(dir, temp);
  set_live(temp, true);
  try {
    std::string text = checkpoint_name(step) + "\n";
    write_synced_file(path, text.data(), text.size(), false);
    std::string pointer = join(dir, kPointerFileName);
    if (::rename(path.c_str(), pointer.c_str()) != 0)
      fail_errno(errno, "renaming " + path + " to " + pointer);
  } catch (...) {
    ::unlink(path.c_str());
    set_live(temp, false);
    throw;
  }
  set_live(temp, false);
  detail::fsync_path(dir);
}

// Moves temp_dir to `final_path`: atomically, replacing a checkpoint of the same step if there
// is one (the old one ends up under temp_dir's name, and is removed).
void rename_into_place(const std::string& temp_dir, const std::string& final_path,
                       const std::string& dir, int64_t step) {
  if (::renameat2(AT_FDCWD, temp_dir.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0)
    return;
  int err = errno;
  std::error_code ec;
  if (err == EEXIST || err == ENOTEMPTY) {
    if (::renameat2(AT_FDCWD, temp_dir.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0)
      fail_errno(errno, "replacing " + final_path + " by " + temp_dir);
    fs::remove_all(temp_dir, ec);
    return;
  }
  if (err != EINVAL && err != ENOSYS) fail_errno(err, "renaming " + temp_dir + " to " + final_path);
  // A file system without renameat2's flags: remove an existing checkpoint first.
  if (fs::exists(final_path, ec))
    if (int remove_err = remove_published(dir, final_path, step))
      fail_errno(remove_err, "moving " + final_path + " aside to remove it");
  if (::rename(temp_dir.c_str(), final_path.c_str()) != 0)
    fail_errno(errno, "renaming " + temp_dir + " to " + final_path);
}

// Removes published checkpoints beyond the newest max_to_keep (a failure leaves one in place).
void remove_old_checkpoints(const std::string& dir, int64_t kept_step, int max_to_keep) {
  if (max_to_keep <= 0) return;
  std::vector<int64_t> steps;
  for (const auto& path : all_checkpoints(dir)) {
    int64_t step = checkpoint_step(fs::path(path).filename().string()).value();
    if (step != kept_step) steps.push_back(step);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (std::size_t i = std::size_t(max_to_keep - 1); i < steps.size(); ++i)
    remove_published(dir, join(dir, checkpoint_name(steps[i])), steps[i]);
}

}  // namespace

std::optional<int64_t> checkpoint_step(const std::string& name) {
  if (name.rfind(kCheckpointPrefix, 0) != 0) return std::nullopt;
  std::string digits = name.substr(std::char_traits<char>::length(kCheckpointPrefix));
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos ||
      (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  return std::stoll(digits);
}

void check_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_errno(ec.value(), "checkpoints cannot be written into " + dir + ": creating it");
  // A probe as a save writes: a file created, written, fsynced and closed, the directory
  // fsynced, then all of it removed. Named as a temporary, so a kill leaves nothing a later
  // begin_save does not clean up.
  const std::string name = temp_name("probe", 0);
  const std::string path = join(dir, name);
  set_live(name, true);
  try {
    const std::string text = "troupe checks that checkpoints can be written here\n";
    try {
      write_synced_file(path, text.data(), text.size(), false);
      detail::fsync_path(dir);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("checkpoints cannot be written into {}: {}", dir, e.what()));
    }
    if (::unlink(path.c_str()) != 0) fail_errno(errno, "checkpoints cannot be written into " + dir + ": removing " + path);
  } catch (...) {
    ::unlink(path.c_str());
    set_live(name, false);
    throw;
  }
  set_live(name, false);
}

std::string begin_save(const std::string& dir, int64_t global_step) {
  TROUPE_CHECK_ARG(global_step >= 0, "checkpoint {}: the global step {} is negative", dir,
                   global_step);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_errno(ec.value(), "creating the checkpoint directory " + dir);
  remove_dead_temporaries(dir);
  std::string name = temp_name("ckpt", global_step);
  std::string path = join(dir, name);
  // Live before it exists: a cleanup on another thread must never take it for a dead one.
  set_live(name, true);
  if (::mkdir(path.c_str(), 0755) != 0) {
    int err = errno;
    set_live(name, false);
    fail_errno(err, "creating " + path);
  }
  return path;
}

namespace {

// `release`: drop each tensor's value once written (the tensors are the caller's to give up).
std::vector<IndexEntry> write_tensors(const std::string& temp_dir, const std::string& file_name,
                                      std::vector<SavedTensor>& tensors, bool release) {
  std::string path = join(temp_dir, file_name);
  TROUPE_CHECK_ARG(detail::is_plain_file_name(file_name) && file_name != kIndexFileName,
                   "checkpoint data file '{}' must be a plain file name other than '{}'",
                   file_name, kIndexFileName);
  std::vector<IndexEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) entries.push_back(entry_for(t, file_name, path));

  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) fail_errno(errno, "creating " + path);
  try {
    uint64_t offset = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      IndexEntry& e = entries[i];
      auto* p = static_cast<const unsigned char*>(e.length ? tensors[i].value.raw_data() : nullptr);
      std::string what = fmt::format("{} (variable '{}')", path, e.name);
      uint32_t crc = 0;
      for (uint64_t done = 0; done < e.length;) {
        std::size_t n = std::size_t(std::min<uint64_t>(kPieceBytes, e.length - done));
        crc = crc32c(p + done, n, crc);
        detail::write_all(fd.get(), p + done, n, what);
        // Start writing this piece to the disk now (no wait): the disk works while the next
        // pieces are copied, and the fsync at the end finds little left to do.
        ::sync_file_range(fd.get(), off_t(offset + done), off_t(n), SYNC_FILE_RANGE_WRITE);
        done += n;
      }
      e.offset = offset;
      e.crc32c = crc;
      offset += e.length;
      if (release) tensors[i].value = Tensor();
    }
    detail::fsync_fd(fd.get(), path);
    fd.close_checked(path);
  } catch (...) {
    // Give the space back now: a full disk is the likeliest reason to be here.
    ::unlink(path.c_str());
    throw;
  }
  return entries;
}

}  // namespace

std::vector<IndexEntry> write_data_file(const std::string& temp_dir, const std::string& file_name,
                                        const std::vector<SavedTensor>& tensors) {
  std::vector<SavedTensor> shared = tensors;  // shares the buffers; nothing is copied
  return write_tensors(temp_dir, file_name, shared, false);
}

std::vector<IndexEntry> write_data_file(const std::string& temp_dir, const std::string& file_name,
                                        std::vector<SavedTensor>&& tensors) {
  std::vector<SavedTensor> owned = std::move(tensors);
  return write_tensors(temp_dir, file_name, owned, true);
}

std::string publish(const std::string& dir, const std::string& temp_dir, int64_t global_step,
                    std::vector<IndexEntry> entries, int max_to_keep) {
  TROUPE_CHECK_ARG(global_step >= 0, "checkpoint {}: the global step {} is negative", dir,
                   global_step);
  std::error_code ec;
  fs::path temp(temp_dir);
  std::string temp_base = temp.filename().string();
  TROUPE_CHECK_ARG(temp_base.rfind(std::string(kTempPrefix) + "ckpt-", 0) == 0 &&
                       fs::equivalent(temp.parent_path().empty() ? "." : temp.parent_path(), dir, ec),
                   "checkpoint {}: {} is not a temporary directory made by begin_save in it", dir,
                   temp_dir);
  detail::check_entries(entries, "checkpoint " + temp_dir, ErrorCode::invalid_argument);
  // Every data file must hold what the entries say, or the published checkpoint would not read.
  std::map<std::string, uint64_t> needed;
  for (const auto& e : entries) needed[e.file] = std::max(needed[e.file], e.offset + e.length);
  for (const auto& [file, bytes] : needed) {
    std::string path = join(temp_dir, file);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) fail_errno(errno, ErrorCode::invalid_argument, "publishing " + path);
    if (uint64_t(st.st_size) < bytes)
      fail(ErrorCode::invalid_argument, "publishing {}: the index needs {} bytes, the file has {}",
           path, bytes, st.st_size);
  }

  Index index;
  index.global_step = global_step;
  index.created_unix_ms = unix_ms_now();
  index.entries = std::move(entries);
  auto bytes = index_to_bytes(index);
  write_synced_file(join(temp_dir, kIndexFileName), bytes.data(), bytes.size(), true);
  detail::fsync_path(temp_dir);

  // One publisher at a time per directory, also across processes.
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) fail_errno(errno, "opening " + dir);
  while (::flock(dir_fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) fail_errno(errno, "locking " + dir);

  std::string final_path = join(dir, checkpoint_name(global_step));
  rename_into_place(temp_dir, final_path, dir, global_step);
  set_live(temp_base, false);
  detail::fsync_fd(dir_fd.get(), dir);
  write_pointer(dir, global_step);
  remove_old_checkpoints(dir, global_step, max_to_keep);
  return final_path;
}

std::vector<std::string> all_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    auto step = checkpoint_step(name);
    std::error_code type_ec;
    if (step && it->is_directory(type_ec)) found.emplace_back(*step, join(dir, name));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

void abandon(const std::string& temp_dir) noexcept {
  try {
    std::string base = fs::path(temp_dir).filename().string();
    if (base.rfind(std::string(kTempPrefix) + "ckpt-", 0) != 0) return;
    std::error_code ec;
    fs::remove_all(temp_dir, ec);
    set_live(base, false);
  } catch (...) {
  }
}

}  // namespace troupe::checkpoint
