// Reading a checkpoint: the pointer, the index, and the variables, assembled from whichever
// saved row slices cover a request and verified (crc32c) before anything is returned.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <cerrno>
#include <map>

#include "core/checkpoint_internal.hpp"
#include "core/crc32c.hpp"

namespace troupe::checkpoint {

namespace {

using detail::Fd;
using detail::join;

// Saved tensors are read in pieces of this size, each checksummed while still in the cache.
constexpr std::size_t kPieceBytes = std::size_t(1) << 20;
// Threads that read the saved tensors of one restore (the calling thread included).
constexpr std::size_t kReaderThreads = 4;

std::string describe(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", name_of(dtype), shape.to_string());
}

// The data files of one checkpoint, each opened once.
class DataFiles {
 public:
  explicit DataFiles(std::string checkpoint_path) : dir_(std::move(checkpoint_path)) {}

  // Reads the bytes of `e` into `out` (e.length bytes) and checks their crc32c and that the
  // file holds them; `out` null: reads through a scratch buffer (verification only).
  void read(const IndexEntry& e, unsigned char* out) {
    File& f = open(e);
    if (e.offset + e.length > f.size)
      fail(ErrorCode::data_loss,
           "{}: truncated: variable '{}' needs bytes [{}, {}) but the file has {} bytes", f.path,
           e.name, e.offset, e.offset + e.length, f.size);
    std::vector<unsigned char> scratch(out ? 0 : std::min<uint64_t>(e.length, kPieceBytes));
    uint32_t crc = 0;
    for (uint64_t done = 0; done < e.length;) {
      std::size_t n = std::size_t(std::min<uint64_t>(kPieceBytes, e.length - done));
      unsigned char* p = out ? out + done : scratch.data();
      if (!detail::pread_all(f.fd.get(), p, n, e.offset + done, f.path))
        fail(ErrorCode::data_loss, "{}: truncated while reading variable '{}' (bytes [{}, {}))",
             f.path, e.name, e.offset, e.offset + e.length);
      crc = crc32c(p, n, crc);
      done += n;
    }
    if (crc != e.crc32c)
      fail(ErrorCode::data_loss,
           "{}: variable '{}' rows [{}, {}) (bytes [{}, {})) are corrupt: crc32c {:#010x}, the "
           "index says {:#010x}",
           f.path, e.name, e.row_begin, e.row_begin + e.rows, e.offset, e.offset + e.length, crc,
           e.crc32c);
  }

 private:
  struct File {
    std::string path;
    Fd fd;
    uint64_t size = 0;
  };

  File& open(const IndexEntry& e) {
    std::lock_guard<std::mutex> lock(mutex_);  // readers on several threads share the files
    auto it = files_.find(e.file);
    if (it != files_.end()) return it->second;
    File f;
    f.path = join(dir_, e.file);
    f.fd = Fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f.fd)
      detail::fail_errno(errno, ErrorCode::data_loss,
                         fmt::format("opening {} (variable '{}')", f.path, e.name));
    struct stat st;
    if (::fstat(f.fd.get(), &st) != 0)
      detail::fail_errno(errno, ErrorCode::data_loss, "stat of " + f.path);
    f.size = uint64_t(st.st_size);
    return files_.emplace(e.file, std::move(f)).first->second;
  }

  std::string dir_;
  std::mutex mutex_;  // guards files_ (open() from the reader threads); takes no other lock
  std::map<std::string, File> files_;  // nodes stay put while others are added
};

// A request resolved against the index: its rows and the tensor that receives them.
struct Target {
  int64_t begin = 0, end = 0;
  Tensor value;
};

}  // namespace

Index read_index(const std::string& checkpoint_path) {
  std::string path = join(checkpoint_path, kIndexFileName);
  auto bytes = detail::read_file(path);
  return parse_index(bytes.data(), bytes.size(), path);
}

namespace {

// "ckpt-200, ckpt-400" (the newest few), or "none".
std::string describe_checkpoints(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& path : all_checkpoints(dir)) names.push_back(path.substr(path.find_last_of('/') + 1));
  if (names.empty()) return "none";
  const std::size_t shown = std::min<std::size_t>(names.size(), 8);
  std::string out = fmt::format("{}", fmt::join(names.end() - std::ptrdiff_t(shown), names.end(), ", "));
  return names.size() > shown ? fmt::format("{} older, then {}", names.size() - shown, out) : out;
}

}  // namespace

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::string pointer = join(dir, kPointerFileName);
  std::vector<unsigned char> bytes;
  try {
    bytes = detail::read_file(pointer);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::not_found) return std::nullopt;
    throw;
  }
  std::string name(bytes.begin(), bytes.end());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
    name.pop_back();
  if (name.empty() || name.size() > 4096 || name.find_first_of(std::string("\n\0", 2)) != std::string::npos)
    fail(ErrorCode::data_loss, "{}: the checkpoint pointer does not hold one checkpoint name",
         pointer);
  // Only a name of this directory's own checkpoints: a pointer edited (or damaged) to name a
  // path elsewhere ("../../etc") is never followed.
  if (!checkpoint_step(name))
    fail(ErrorCode::data_loss,
         "{}: the checkpoint pointer holds '{}', which is not the name of a checkpoint in {} (ckpt-<step>); "
         "its checkpoints: {}",
         pointer, name.size() > 80 ? name.substr(0, 80) + "..." : name, dir, describe_checkpoints(dir));
  std::string path = join(dir, name);
  std::string index = join(path, kIndexFileName);
  struct stat st;
  if (::stat(index.c_str(), &st) != 0)
    detail::fail_errno(errno, ErrorCode::data_loss,
                       fmt::format("{} names the checkpoint '{}', which is gone: {}", pointer,
                                   name, index));
  return path;
}

std::vector<Tensor> read(const std::string& checkpoint_path, const std::vector<Request>& requests) {
  Index index = read_index(checkpoint_path);
  std::string where = join(checkpoint_path, kIndexFileName);
  // The entries are sorted by (name, row_begin) and cover each variable exactly once.
  std::map<std::string, std::vector<const IndexEntry*>> by_name;
  for (const auto& e : index.entries) by_name[e.name].push_back(&e);

  std::vector<Target> targets(requests.size());
  // For each saved entry needed: which targets take rows from it.
  std::map<const IndexEntry*, std::vector<std::size_t>> readers;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const Request& q = requests[r];
    auto it = by_name.find(q.name);
    if (it == by_name.end()) {
      std::string names;
      int listed = 0;
      for (const auto& [name, unused] : by_name) {
        if (listed++ == 10) {
          names += ", ...";
          break;
        }
        names += (names.empty() ? "'" : ", '") + name + "'";
      }
      fail(ErrorCode::not_found, "{}: no variable '{}' in the checkpoint (it holds {} variables{}{})",
           where, q.name, by_name.size(), by_name.empty() ? "" : ": ", names);
    }
    const IndexEntry& first = *it->second.front();
    if (q.dtype != first.dtype || q.full_shape != first.full_shape)
      fail(ErrorCode::invalid_argument,
           "{}: variable '{}' is {} in the checkpoint, the restore asks for {}", where, q.name,
           describe(first.dtype, first.full_shape), describe(q.dtype, q.full_shape));
    int64_t total = q.full_shape.rank() == 0 ? 1 : q.full_shape[0];
    Target& t = targets[r];
    t.begin = q.rows < 0 ? 0 : q.row_begin;
    t.end = q.rows < 0 ? total : q.row_begin + q.rows;
    if (q.rows >= 0 && (q.row_begin < 0 || q.row_begin > total || q.rows > total - q.row_begin ||
                        (q.full_shape.rank() == 0 && q.rows != 1)))
      fail(ErrorCode::invalid_argument,
           "{}: the restore of variable '{}' ({}) asks for {} rows from row {}, outside its {} rows",
           where, q.name, describe(q.dtype, q.full_shape), q.rows, q.row_begin, total);
    Shape shape = q.full_shape;
    if (shape.rank() > 0) shape.set_dim(0, t.end - t.begin);
    t.value = Tensor(q.dtype, shape);
    for (const IndexEntry* e : it->second)
      if (e->row_begin < t.end && e->row_begin + e->rows > t.begin) readers[e].push_back(r);
      else if (e->rows == 0 && t.begin == t.end) readers[e].push_back(r);  // verify empty slices too
  }

  DataFiles files(checkpoint_path);
  auto read_one = [&](const IndexEntry* e, const std::vector<std::size_t>& takers) {
    uint64_t row = detail::row_bytes(e->dtype, e->full_shape);
    const Target& only = targets[takers.front()];
    if (takers.size() == 1 && only.begin == e->row_begin && only.end == e->row_begin + e->rows) {
      files.read(*e, static_cast<unsigned char*>(e->length ? only.value.raw_data() : nullptr));
      return;
    }
    std::vector<unsigned char> saved(e->length);
    files.read(*e, saved.data());
    for (std::size_t r : takers) {
      const Target& t = targets[r];
      int64_t from = std::max(t.begin, e->row_begin), to = std::min(t.end, e->row_begin + e->rows);
      if (to <= from) continue;
      std::memcpy(static_cast<unsigned char*>(t.value.raw_data()) + uint64_t(from - t.begin) * row,
                  saved.data() + uint64_t(from - e->row_begin) * row, uint64_t(to - from) * row);
    }
  };
  // Several saved tensors are read at once, so that one waits for the disk while another is
  // checksummed (and its fresh pages are faulted in). Takers of one entry write disjoint rows.
  std::vector<std::pair<const IndexEntry*, const std::vector<std::size_t>*>> jobs;
  for (const auto& [e, takers] : readers) jobs.push_back({e, &takers});
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;  // guards error (the first failure); takes no other lock
  auto work = [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      try {
        read_one(jobs[j].first, *jobs[j].second);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = jobs.size();
      }
    }
  };
  std::vector<std::thread> helpers;
  const std::size_t extra = std::min<std::size_t>(kReaderThreads, jobs.size()) - (jobs.empty() ? 0 : 1);
  for (std::size_t i = 0; i < extra; ++i) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  if (error) std::rethrow_exception(error);
  std::vector<Tensor> out;
  out.reserve(targets.size());
  for (auto& t : targets) out.push_back(std::move(t.value));
  return out;
}

Index verify(const std::string& checkpoint_path) {
  Index index = read_index(checkpoint_path);
  DataFiles files(checkpoint_path);
  for (const auto& e : index.entries) files.read(e, nullptr);
  return index;
}

std::string named_checkpoint(const std::string& dir, const std::string& name) {
  if (!checkpoint_step(name))
    fail(ErrorCode::invalid_argument, "'{}' is not the name of a checkpoint (ckpt-<step>, e.g. ckpt-400); {} has: {}",
         name, dir, describe_checkpoints(dir));
  const std::string path = join(dir, name);
  struct stat st;
  if (::stat(join(path, kIndexFileName).c_str(), &st) != 0)
    fail(ErrorCode::not_found, "{} has no checkpoint {}; its checkpoints: {}", dir, name, describe_checkpoints(dir));
  return path;
}

std::optional<std::string> newest_intact_checkpoint(const std::string& dir, std::optional<int64_t> below) {
  std::vector<std::string> paths = all_checkpoints(dir);
  for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
    const int64_t step = *checkpoint_step(it->substr(it->find_last_of('/') + 1));
    if (below && step >= *below) continue;
    try {
      verify(*it);
      return *it;
    } catch (const Error&) {
      // damaged too: try the one before
    }
  }
  return std::nullopt;
}

}  // namespace troupe::checkpoint
