// Checkpoints on disk: every dtype round-trips, variables reshard by rows both ways, damaged or
// mismatched checkpoints are refused naming the file and the variable, max_to_keep and the
// cleanup of dead saves, and a full disk that fails a save without touching the previous one.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>

#include <boost/test/unit_test.hpp>

#include "core/checkpoint.hpp"
#include "core/crc32c.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/random_tensor.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
namespace ck = troupe::checkpoint;
namespace fs = std::filesystem;
using troupe::testing::ScratchDir;

namespace {

using troupe::testing::AllTypes;
using troupe::testing::random_tensor;

Tensor iota(int64_t rows, int64_t cols) {
  std::vector<float> v(std::size_t(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return Tensor::from_vector(v, Shape{rows, cols});
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0);
}

// One file, whole variables: the checkpoint's path.
std::string save(const std::string& dir, int64_t step, const std::vector<ck::SavedTensor>& tensors,
                 int max_to_keep = 5) {
  std::string temp = ck::begin_save(dir, step);
  auto entries = ck::write_data_file(temp, "shard-00000-of-00001.data", tensors);
  return ck::publish(dir, temp, step, entries, max_to_keep);
}

ck::Request whole(const std::string& name, const Tensor& like) {
  return {name, like.dtype(), like.shape()};
}

// Flips one bit of a file at `offset`.
void flip_bit(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c;
  f.get(c);
  f.seekp(std::streamoff(offset));
  f.put(char(c ^ 0x10));
}

// Bit-at-a-time CRC-32C, the definition itself.
uint32_t crc32c_reference(const unsigned char* p, std::size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A tmpfs of `size` mounted on `dir` for the test's duration; unmounted in any case.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const char* options) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// The precondition of the tests that mount a tmpfs (they need root, or CAP_SYS_ADMIN): skipped,
// with the reason, where none can be mounted.
boost::test_tools::assertion_result tmpfs_can_be_mounted(boost::unit_test::test_unit_id) {
  ScratchDir dir;
  TmpfsMount mount(dir.path() + "/probe", "size=64k");
  boost::test_tools::assertion_result result(mount.mounted());
  if (!mount.mounted()) result.message() << "cannot mount a tmpfs: " << mount.error();
  return result;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_known_vectors_and_the_bitwise_definition) {
  const char* digits = "123456789";
  BOOST_TEST(crc32c(digits, 9) == 0xE3069283u);
  BOOST_TEST(crc32c(digits, 0) == 0u);
  // RFC 3720, B.4.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) up[i] = (unsigned char)i, down[i] = (unsigned char)(31 - i);
  BOOST_TEST(crc32c(zeros.data(), 32) == 0x8A9136AAu);
  BOOST_TEST(crc32c(ones.data(), 32) == 0x62A8AB43u);
  BOOST_TEST(crc32c(up.data(), 32) == 0x46DD794Eu);
  BOOST_TEST(crc32c(down.data(), 32) == 0x113FDB5Cu);
  // Every length and alignment, and continuing from a prefix.
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(4096);
  for (auto& b : bytes) b = (unsigned char)rng();
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t start = rng() % 64, n = rng() % 2000, cut = n ? rng() % n : 0;
    const unsigned char* p = bytes.data() + start;
    uint32_t expected = crc32c_reference(p, n);
    BOOST_TEST(crc32c(p, n) == expected);
    BOOST_TEST(crc32c(p + cut, n - cut, crc32c(p, cut)) == expected);
  }
}

BOOST_AUTO_TEST_CASE(every_dtype_round_trips_including_empty_tensors_and_scalars) {
  ScratchDir dir;
  std::mt19937 rng(1);
  std::vector<ck::SavedTensor> saved;
  std::apply(
      [&](auto... type) {
        (
            [&](auto t) {
              using T = decltype(t);
              std::string n = name_of(dtype_v<T>);
              saved.push_back({n + "/matrix", random_tensor<T>(Shape{5, 3}, rng), {}, 0});
              saved.push_back({n + "/scalar", random_tensor<T>(Shape{}, rng), {}, 0});
              saved.push_back({n + "/empty", random_tensor<T>(Shape{0, 4}, rng), {}, 0});
              saved.push_back({n + "/cube", random_tensor<T>(Shape{2, 3, 7}, rng), {}, 0});
            }(type),
            ...);
      },
      AllTypes{});
  std::string path = save(dir.path(), 3, saved);
  BOOST_TEST(path == dir.path() + "/ckpt-3");
  BOOST_TEST(ck::latest_checkpoint(dir.path()).value() == path);

  std::vector<ck::Request> requests;
  for (const auto& s : saved) requests.push_back(whole(s.name, s.value));
  auto back = ck::read(path, requests);
  BOOST_TEST_REQUIRE(back.size() == saved.size());
  for (std::size_t i = 0; i < saved.size(); ++i)
    BOOST_TEST(same_bytes(back[i], saved[i].value), saved[i].name << ": " << back[i].describe());

  ck::Index index = ck::verify(path);
  BOOST_TEST(index.version == ck::kFormatVersion);
  BOOST_TEST(index.global_step == 3);
  BOOST_TEST(index.created_unix_ms > 0);
  BOOST_TEST(index.entries.size() == saved.size());
}

BOOST_AUTO_TEST_CASE(a_variable_saved_as_three_slices_in_two_files_restores_whole_and_as_two_other_slices) {
  ScratchDir dir;
  Tensor full = iota(10, 4);
  Shape full_shape{10, 4};
  std::string temp = ck::begin_save(dir.path(), 7);
  // Rows [0, 3) and [7, 10) in one file, [3, 7) in the other, plus a scalar beside them.
  auto a = ck::write_data_file(temp, "shard-00000-of-00002.data",
                               {{"w", full.slice(0, 3), full_shape, 0},
                                {"step", Tensor::scalar<int64_t>(7), {}, 0},
                                {"w", full.slice(7, 10), full_shape, 7}});
  auto b = ck::write_data_file(temp, "shard-00001-of-00002.data", {{"w", full.slice(3, 7), full_shape, 3}});
  a.insert(a.end(), b.begin(), b.end());
  std::string path = ck::publish(dir.path(), temp, 7, a, 3);

  auto back = ck::read(path, {{"w", DType::float32, full_shape},
                              {"w", DType::float32, full_shape, 0, 5},
                              {"w", DType::float32, full_shape, 5, 5},
                              {"step", DType::int64, Shape{}}});
  BOOST_TEST(same_bytes(back[0], full));
  BOOST_TEST(same_bytes(back[1], full.slice(0, 5).copy()));
  BOOST_TEST(same_bytes(back[2], full.slice(5, 10).copy()));
  BOOST_TEST(back[3].scalar_value<int64_t>() == 7);
  // A slice inside one saved slice, and an empty one.
  auto inner = ck::read(path, {{"w", DType::float32, full_shape, 8, 1}, {"w", DType::float32, full_shape, 4, 0}});
  BOOST_TEST(same_bytes(inner[0], full.slice(8, 9).copy()));
  BOOST_TEST(inner[1].shape() == (Shape{0, 4}));
}

BOOST_AUTO_TEST_CASE(a_variable_saved_whole_restores_as_row_slices) {
  ScratchDir dir;
  Tensor full = iota(9, 2);
  std::string path = save(dir.path(), 1, {{"w", full, {}, 0}});
  Shape shape{9, 2};
  auto back = ck::read(path, {{"w", DType::float32, shape, 0, 3},
                              {"w", DType::float32, shape, 3, 3},
                              {"w", DType::float32, shape, 6, 3}});
  for (int i = 0; i < 3; ++i) BOOST_TEST(same_bytes(back[i], full.slice(3 * i, 3 * i + 3).copy()));
}

BOOST_AUTO_TEST_CASE(a_missing_variable_is_refused_naming_the_index_and_the_variable) {
  ScratchDir dir;
  std::string path = save(dir.path(), 1, {{"w", iota(2, 2), {}, 0}});
  auto message = error_of([&] { ck::read(path, {{"bias", DType::float32, Shape{2}}}); },
                          ErrorCode::not_found);
  BOOST_TEST(contains(message, path + "/index"), message);
  BOOST_TEST(contains(message, "no variable 'bias'"), message);
  BOOST_TEST(contains(message, "'w'"), message);
}

BOOST_AUTO_TEST_CASE(a_dtype_or_shape_mismatch_is_refused_naming_both) {
  ScratchDir dir;
  std::string path = save(dir.path(), 1, {{"w", iota(2, 3), {}, 0}});
  auto dtype = error_of([&] { ck::read(path, {{"w", DType::float64, Shape{2, 3}}}); },
                        ErrorCode::invalid_argument);
  BOOST_TEST(contains(dtype, "variable 'w' is float32[2,3] in the checkpoint, the restore asks for float64[2,3]"), dtype);
  auto shape = error_of([&] { ck::read(path, {{"w", DType::float32, Shape{3, 2}}}); },
                        ErrorCode::invalid_argument);
  BOOST_TEST(contains(shape, "float32[2,3] in the checkpoint, the restore asks for float32[3,2]"), shape);
  auto rows = error_of([&] { ck::read(path, {{"w", DType::float32, Shape{2, 3}, 1, 2}}); },
                       ErrorCode::invalid_argument);
  BOOST_TEST(contains(rows, "asks for 2 rows from row 1, outside its 2 rows"), rows);
}

BOOST_AUTO_TEST_CASE(a_truncated_data_file_is_refused_naming_the_file_and_the_variable) {
  ScratchDir dir;
  std::string path = save(dir.path(), 1, {{"a", iota(4, 4), {}, 0}, {"b", iota(4, 4), {}, 0}});
  std::string data = path + "/shard-00000-of-00001.data";
  fs::resize_file(data, 100);
  auto message = error_of([&] { ck::read(path, {whole("a", iota(4, 4)), whole("b", iota(4, 4))}); },
                          ErrorCode::data_loss);
  BOOST_TEST(contains(message, data + ": truncated: variable 'b' needs bytes [64, 128) but the file has 100 bytes"), message);
  fs::remove(data);
  auto gone = error_of([&] { ck::verify(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(gone, "opening " + data + " (variable 'a')"), gone);
  BOOST_TEST(contains(gone, "ENOENT"), gone);
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_is_refused_by_its_crc32c_naming_the_file_and_the_variable) {
  ScratchDir dir;
  std::string path = save(dir.path(), 1, {{"a", iota(4, 4), {}, 0}, {"b", iota(4, 4), {}, 0}});
  std::string data = path + "/shard-00000-of-00001.data";
  flip_bit(data, 64 + 17);  // inside b
  // a alone still reads: the damage is b's.
  BOOST_TEST(same_bytes(ck::read(path, {whole("a", iota(4, 4))})[0], iota(4, 4)));
  auto message = error_of([&] { ck::read(path, {whole("a", iota(4, 4)), whole("b", iota(4, 4))}); },
                          ErrorCode::data_loss);
  BOOST_TEST(contains(message, data + ": variable 'b' rows [0, 4) (bytes [64, 128)) are corrupt: crc32c"), message);
  auto verified = error_of([&] { ck::verify(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(verified, "variable 'b'"), verified);
}

BOOST_AUTO_TEST_CASE(a_damaged_index_or_an_unknown_version_is_refused_naming_the_index) {
  ScratchDir dir;
  std::string path = save(dir.path(), 4, {{"w", iota(2, 2), {}, 0}});
  std::string index_path = path + "/index";
  ck::Index index = ck::read_index(path);

  index.version = 2;
  auto bytes = ck::index_to_bytes(index);
  std::ofstream(index_path, std::ios::binary | std::ios::trunc).write((const char*)bytes.data(), bytes.size());
  auto version = error_of([&] { ck::read_index(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(version, index_path + ": checkpoint index format version 2 is not supported (this build reads 1)"), version);

  index.version = 1;
  bytes = ck::index_to_bytes(index);
  std::ofstream(index_path, std::ios::binary | std::ios::trunc).write((const char*)bytes.data(), bytes.size());
  BOOST_TEST(ck::read_index(path).global_step == 4);
  flip_bit(index_path, bytes.size() - 9);
  auto flipped = error_of([&] { ck::read(path, {whole("w", iota(2, 2))}); }, ErrorCode::data_loss);
  BOOST_TEST(contains(flipped, index_path + ": the checkpoint index is corrupt: crc32c"), flipped);

  fs::resize_file(index_path, 10);
  auto cut = error_of([&] { ck::read_index(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(cut, index_path + ": not a checkpoint index"), cut);

  // An index whose entries leave rows of a variable unsaved names the variable and the rows.
  index.entries[0].rows = 1;
  index.entries[0].length = 8;
  bytes = ck::index_to_bytes(index);
  std::ofstream(index_path, std::ios::binary | std::ios::trunc).write((const char*)bytes.data(), bytes.size());
  auto gap = error_of([&] { ck::read_index(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(gap, index_path + ": variable 'w' (float32[2,2]): rows [1, 2) are in no saved slice"), gap);

  auto none = error_of([&] { ck::read_index(dir.path() + "/ckpt-99"); }, ErrorCode::not_found);
  BOOST_TEST(contains(none, dir.path() + "/ckpt-99/index"), none);
}

BOOST_AUTO_TEST_CASE(the_pointer_naming_a_gone_directory_is_refused_naming_the_pointer_file) {
  ScratchDir dir;
  BOOST_TEST(!ck::latest_checkpoint(dir.path() + "/nothing-here").has_value());
  BOOST_TEST(!ck::latest_checkpoint(dir.path()).has_value());
  std::string path = save(dir.path(), 12, {{"w", iota(2, 2), {}, 0}});
  BOOST_TEST(ck::latest_checkpoint(dir.path()).value() == path);
  fs::remove_all(path);
  auto message = error_of([&] { ck::latest_checkpoint(dir.path()); }, ErrorCode::data_loss);
  BOOST_TEST(contains(message, dir.path() + "/checkpoint names the checkpoint 'ckpt-12', which is gone"), message);
}

BOOST_AUTO_TEST_CASE(a_pointer_naming_anything_but_a_checkpoint_of_its_directory_is_refused_naming_the_file) {
  ScratchDir dir;
  const std::string first = save(dir.path(), 1, {{"w", iota(2, 2), {}, 0}});
  const std::string pointer = dir.path() + "/checkpoint";
  for (const std::string name : {"garbage/../../etc", "../ckpt-1", "/etc", "ckpt-01", "ckpt-1/.."}) {
    std::ofstream(pointer, std::ios::trunc) << name << "\n";
    auto message = error_of([&] { ck::latest_checkpoint(dir.path()); }, ErrorCode::data_loss);
    BOOST_TEST(contains(message, pointer + ": the checkpoint pointer holds '" + name + "'"), message);
    BOOST_TEST(contains(message, "its checkpoints: ckpt-1"), message);
  }
  std::ofstream(pointer, std::ios::trunc) << "ckpt-1\n";
  BOOST_TEST(ck::latest_checkpoint(dir.path()).value() == first);
}

BOOST_AUTO_TEST_CASE(an_older_checkpoint_is_found_by_name_and_the_newest_intact_one_skips_a_damaged_one) {
  ScratchDir dir;
  const std::string first = save(dir.path(), 100, {{"w", iota(4, 4), {}, 0}});
  const std::string second = save(dir.path(), 200, {{"w", iota(4, 4), {}, 0}});
  const std::string third = save(dir.path(), 300, {{"w", iota(4, 4), {}, 0}});
  BOOST_TEST(ck::named_checkpoint(dir.path(), "ckpt-200") == second);
  auto bad = error_of([&] { ck::named_checkpoint(dir.path(), "../ckpt-200"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(bad, "'../ckpt-200' is not the name of a checkpoint"), bad);
  auto absent = error_of([&] { ck::named_checkpoint(dir.path(), "ckpt-250"); }, ErrorCode::not_found);
  BOOST_TEST(contains(absent, "has no checkpoint ckpt-250; its checkpoints: ckpt-100, ckpt-200, ckpt-300"), absent);
  BOOST_TEST(ck::newest_intact_checkpoint(dir.path()).value() == third);
  flip_bit(third + "/shard-00000-of-00001.data", 3);
  flip_bit(second + "/shard-00000-of-00001.data", 3);
  BOOST_TEST(ck::newest_intact_checkpoint(dir.path()).value() == first);
  BOOST_TEST(ck::newest_intact_checkpoint(dir.path(), 300).value() == first);
  BOOST_TEST(!ck::newest_intact_checkpoint(dir.path(), 100).has_value());
}

BOOST_AUTO_TEST_CASE(a_directory_checked_for_checkpoints_is_left_as_it_was_and_one_in_a_file_is_refused) {
  ScratchDir dir;
  ck::check_writable(dir.path() + "/new");  // created, probed, nothing left in it
  BOOST_TEST(fs::is_directory(dir.path() + "/new"));
  BOOST_TEST(fs::is_empty(dir.path() + "/new"));
  const std::string file = dir.path() + "/a-file";
  std::ofstream(file) << "not a directory";
  auto message = error_of([&] { ck::check_writable(file + "/ckpt"); }, ErrorCode::unavailable);
  BOOST_TEST(contains(message, "checkpoints cannot be written into " + file + "/ckpt"), message);
  BOOST_TEST(contains(message, "ENOTDIR"), message);
}

BOOST_AUTO_TEST_CASE(a_read_only_directory_is_refused_by_the_check_before_any_save,
                     *boost::unit_test::precondition(tmpfs_can_be_mounted)) {
  ScratchDir dir;
  const std::string ro = dir.path() + "/ro";
  TmpfsMount mount(ro, "size=1m");
  BOOST_TEST_REQUIRE(mount.mounted(), mount.error());
  BOOST_TEST_REQUIRE(::mount(nullptr, ro.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  auto read_only = error_of([&] { ck::check_writable(ro); }, ErrorCode::permission_denied);
  BOOST_TEST(contains(read_only, "checkpoints cannot be written into " + ro), read_only);
  BOOST_TEST(contains(read_only, "EROFS"), read_only);
}

BOOST_AUTO_TEST_CASE(max_to_keep_keeps_the_newest_and_removes_only_after_a_publish) {
  ScratchDir dir;
  for (int64_t step = 1; step <= 4; ++step) save(dir.path(), step, {{"w", iota(1, 1), {}, 0}}, 2);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  BOOST_TEST(names == (std::vector<std::string>{"checkpoint", "ckpt-3", "ckpt-4"}), fmt::format("{}", fmt::join(names, " ")));
  BOOST_TEST(ck::all_checkpoints(dir.path()) ==
             (std::vector<std::string>{dir.path() + "/ckpt-3", dir.path() + "/ckpt-4"}));

  // A publish that fails (an entry naming a data file that is not there) removes nothing.
  std::string temp = ck::begin_save(dir.path(), 5);
  ck::IndexEntry e{"w", DType::float32, Shape{1}, 0, 1, "missing.data", 0, 4, 0};
  auto message = error_of([&] { ck::publish(dir.path(), temp, 5, {e}, 1); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "missing.data"), message);
  ck::abandon(temp);
  BOOST_TEST(fs::exists(dir.path() + "/ckpt-3"));
  BOOST_TEST(ck::latest_checkpoint(dir.path()).value() == dir.path() + "/ckpt-4");
  BOOST_TEST(!fs::exists(temp));

  // Saving a step again replaces it; max_to_keep counts the new one first.
  Tensor again = Tensor::from_vector<float>({42.0f}, Shape{1, 1});
  save(dir.path(), 3, {{"w", again, {}, 0}}, 1);
  BOOST_TEST(!fs::exists(dir.path() + "/ckpt-4"));
  BOOST_TEST(ck::latest_checkpoint(dir.path()).value() == dir.path() + "/ckpt-3");
  BOOST_TEST(ck::read(dir.path() + "/ckpt-3", {whole("w", again)})[0].data<float>()[0] == 42.0f);
  // max_to_keep <= 0 keeps everything.
  for (int64_t step = 10; step <= 12; ++step) save(dir.path(), step, {{"w", iota(1, 1), {}, 0}}, 0);
  BOOST_TEST(ck::all_checkpoints(dir.path()).size() == 4u);
  for (int64_t step : {3, 10, 11, 12}) BOOST_TEST(fs::exists(dir.path() + "/ckpt-" + std::to_string(step)));
  BOOST_TEST(ck::all_checkpoints(dir.path() + "/nothing-here").empty());
}

BOOST_AUTO_TEST_CASE(a_dead_temporary_directory_is_removed_by_the_next_begin_save) {
  ScratchDir dir;
  // A child process begins a save and dies without finishing it.
  pid_t child = ::fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    try {
      std::string temp = ck::begin_save(dir.path(), 8);
      ck::write_data_file(temp, "shard.data", {{"w", iota(2, 2), {}, 0}});
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  BOOST_TEST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_TEST_REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  auto temporaries = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().filename().string().rfind(".tmp-", 0) == 0) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  auto left = temporaries();
  BOOST_TEST_REQUIRE(left.size() == 1u);
  BOOST_TEST(contains(left[0], fmt::format(".tmp-ckpt-8-{}-", child)), left[0]);

  // Another host's work in progress and this process's live save are left alone.
  fs::create_directory(dir.path() + "/.tmp-ckpt-8-1-0badf00d-another-host");
  std::string live = ck::begin_save(dir.path(), 9);
  std::string next = ck::begin_save(dir.path(), 10);
  auto now = temporaries();
  BOOST_TEST(now.size() == 3u, fmt::format("{}", fmt::join(now, " ")));
  BOOST_TEST(fs::exists(live));
  BOOST_TEST(fs::exists(next));
  BOOST_TEST(!fs::exists(dir.path() + "/" + left[0]));
  BOOST_TEST(fs::exists(dir.path() + "/.tmp-ckpt-8-1-0badf00d-another-host"));
  ck::abandon(live);
  ck::abandon(next);
  BOOST_TEST(!fs::exists(live));
}

BOOST_AUTO_TEST_CASE(publish_refuses_slices_that_overlap_or_leave_rows_unsaved) {
  ScratchDir dir;
  Tensor full = iota(6, 2);
  Shape shape{6, 2};
  std::string temp = ck::begin_save(dir.path(), 1);
  auto entries = ck::write_data_file(temp, "a.data", {{"w", full.slice(0, 4), shape, 0}, {"w", full.slice(3, 5), shape, 3}});
  auto overlap = error_of([&] { ck::publish(dir.path(), temp, 1, entries, 1); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(overlap, "variable 'w': rows [3, 4) are saved twice"), overlap);
  entries.pop_back();
  auto gap = error_of([&] { ck::publish(dir.path(), temp, 1, entries, 1); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(gap, "variable 'w' (float32[6,2]): rows [4, 6) are in no saved slice"), gap);
  auto bad_rows = error_of([&] { ck::write_data_file(temp, "b.data", {{"w", iota(2, 3), shape, 0}}); },
                           ErrorCode::invalid_argument);
  BOOST_TEST(contains(bad_rows, "variable 'w': a value of shape [2,3] is not rows of its full shape [6,2]"), bad_rows);
  ck::abandon(temp);
  BOOST_TEST(!ck::latest_checkpoint(dir.path()).has_value());
}

BOOST_AUTO_TEST_CASE(a_full_disk_fails_the_save_naming_enospc_and_keeps_the_previous_checkpoint,
                     *boost::unit_test::precondition(tmpfs_can_be_mounted)) {
  ScratchDir dir;
  std::string small = dir.path() + "/small";
  TmpfsMount mount(small, "size=1m");
  BOOST_TEST_REQUIRE(mount.mounted(), mount.error());
  Tensor w = iota(256, 256);  // 256 KiB
  std::string first = save(small, 1, {{"w", w, {}, 0}}, 5);
  std::string temp = ck::begin_save(small, 2);
  Tensor big = iota(1024, 512);  // 2 MiB, more than the disk
  auto message = error_of([&] { ck::write_data_file(temp, "shard.data", {{"w", big, {}, 0}}); },
                          ErrorCode::resource_exhausted);
  BOOST_TEST(contains(message, "writing " + temp + "/shard.data (variable 'w'): No space left on device (ENOSPC)"), message);
  ck::abandon(temp);
  BOOST_TEST(ck::latest_checkpoint(small).value() == first);
  BOOST_TEST(same_bytes(ck::read(first, {whole("w", w)})[0], w));
  // The space is back: the next save of the same size succeeds.
  std::string second = save(small, 2, {{"w", w, {}, 0}}, 1);
  BOOST_TEST(same_bytes(ck::read(second, {whole("w", w)})[0], w));
}

BOOST_AUTO_TEST_CASE(an_unwritable_directory_fails_the_save_naming_it) {
  ScratchDir dir;
  std::string file = dir.path() + "/a-file";
  std::ofstream(file) << "not a directory";
  auto message = error_of([&] { ck::begin_save(file + "/ckpt", 1); }, ErrorCode::unavailable);
  BOOST_TEST(contains(message, "creating the checkpoint directory " + file + "/ckpt"), message);
  BOOST_TEST(contains(message, "ENOTDIR"), message);
}

BOOST_AUTO_TEST_CASE(a_read_only_directory_fails_the_save_naming_it_and_erofs_and_keeps_the_checkpoints,
                     *boost::unit_test::precondition(tmpfs_can_be_mounted)) {
  ScratchDir dir;
  std::string ro = dir.path() + "/ro";
  TmpfsMount mount(ro, "size=1m");
  BOOST_TEST_REQUIRE(mount.mounted(), mount.error());
  std::string first = save(ro, 1, {{"w", iota(2, 2), {}, 0}});
  BOOST_TEST_REQUIRE(::mount(nullptr, ro.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  auto read_only = error_of([&] { save(ro, 2, {{"w", iota(2, 2), {}, 0}}); }, ErrorCode::permission_denied);
  BOOST_TEST(contains(read_only, "EROFS"), read_only);
  BOOST_TEST(contains(read_only, ro), read_only);
  BOOST_TEST(ck::latest_checkpoint(ro).value() == first);
  BOOST_TEST(same_bytes(ck::read(first, {whole("w", iota(2, 2))})[0], iota(2, 2)));
}

BOOST_AUTO_TEST_CASE(a_tensor_larger_than_512_mib_is_saved_and_restored) {
  ScratchDir dir;
  int64_t rows = (int64_t(520) << 20) / 4096;  // 520 MiB of float32 in rows of 1024
  Tensor big(DType::float32, Shape{rows, 1024});
  float* p = big.data<float>();
  for (int64_t i = 0; i < big.num_elements(); ++i) p[i] = float(i % 1000003);
  std::string path = save(dir.path(), 1, {{"big", big, {}, 0}});
  auto back = ck::read(path, {{"big", DType::float32, big.shape(), rows - 2, 2}});
  BOOST_TEST(same_bytes(back[0], big.slice(rows - 2, rows).copy()));
  ck::verify(path);
}

BOOST_AUTO_TEST_SUITE_END()
