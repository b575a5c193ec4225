#include "ops/data/idx.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include <zlib.h>

namespace troupe::data {
namespace {

namespace fs = std::filesystem;

// A corrupt header could declare any size; this bounds what one file may make us allocate.
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 34;

struct IdxKind {
  const char* what;  // "images" or "labels", as messages name the file
  uint32_t magic;
  const char* layout;
};
constexpr IdxKind kImages{"images", kIdxImagesMagic, "uint8, 3 dimensions"};
constexpr IdxKind kLabels{"labels", kIdxLabelsMagic, "uint8, 1 dimension"};

class GzReader {
 public:
  GzReader(const IdxKind& kind, const std::string& path) : kind_(kind), path_(path) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (!fs::exists(status))
      fail(ErrorCode::not_found, "there is no {} file '{}'", kind.what, path);
    if (fs::is_directory(status))
      fail(ErrorCode::not_found, "{} file '{}' is a directory", kind.what, path);
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr)
      fail(ErrorCode::not_found, "cannot open {} file '{}': {}", kind.what, path,
           errno != 0 ? std::strerror(errno) : "out of memory");
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() { gzclose(file_); }

  // Up to n bytes into p; fewer only at the end of the data. A truncated gzip stream ends
  // early like a short plain file; a corrupt one is refused.
  std::size_t read(void* p, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      unsigned chunk = unsigned(std::min<std::size_t>(n - done, INT_MAX));
      int got = gzread(file_, static_cast<char*>(p) + done, chunk);
      if (got < 0) {
        int errnum = 0;
        const char* message = gzerror(file_, &errnum);
        fail(ErrorCode::data_loss, "{} file '{}' cannot be read after {} bytes: {}", kind_.what,
             path_, offset_ + done, errnum == Z_ERRNO ? std::strerror(errno) : message);
      }
      if (got == 0) break;
      done += std::size_t(got);
    }
    offset_ += done;
    return done;
  }

  uint64_t offset() const { return offset_; }
  bool plain() const { return gzdirect(file_) == 1; }

 private:
  const IdxKind& kind_;
  const std::string& path_;
  gzFile file_ = nullptr;
  uint64_t offset_ = 0;  // bytes of (uncompressed) data read so far
};

uint32_t big_endian(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Reads and checks the header; returns the shape it declares.
Shape read_header(GzReader& in, const IdxKind& kind, const std::string& path) {
  const int rank = int(kind.magic & 0xff);
  const uint64_t header_bytes = 4 + 4 * uint64_t(rank);

  unsigned char header[4 + 4 * 3];
  if (std::size_t got = in.read(header, 4); got < 4)
    fail(ErrorCode::data_loss, "{} file '{}' ends after {} bytes, inside its {}-byte header",
         kind.what, path, got, header_bytes);
  if (uint32_t magic = big_endian(header); magic != kind.magic)
    fail(ErrorCode::data_loss, "{} file '{}' has magic 0x{:08x}, expected 0x{:08x} ({})", kind.what,
         path, magic, kind.magic, kind.layout);
  if (in.read(header + 4, 4 * std::size_t(rank)) < 4 * std::size_t(rank))
    fail(ErrorCode::data_loss, "{} file '{}' ends after {} bytes, inside its {}-byte header",
         kind.what, path, in.offset(), header_bytes);

  std::vector<int64_t> dims;
  uint64_t payload = 1;
  for (int i = 0; i < rank; ++i) {
    uint64_t dim = big_endian(header + 4 + 4 * i);
    dims.push_back(int64_t(dim));
    // Saturates just past the limit instead of overflowing; a zero dim still empties it.
    if (dim == 0)
      payload = 0;
    else if (payload > kMaxPayloadBytes / dim)
      payload = kMaxPayloadBytes + 1;
    else
      payload *= dim;
  }
  Shape shape(dims);
  if (payload > kMaxPayloadBytes)
    fail(ErrorCode::data_loss, "{} file '{}' declares shape {}, over the {} GiB a file may hold",
         kind.what, path, shape.to_string(), kMaxPayloadBytes >> 30);
  return shape;
}

Tensor read_idx(const IdxKind& kind, const std::string& path) {
  GzReader in(kind, path);
  Shape shape = read_header(in, kind, path);
  const uint64_t header_bytes = 4 + 4 * uint64_t(shape.rank());
  const uint64_t payload = uint64_t(shape.num_elements());
  const uint64_t total = header_bytes + payload;

  // A plain file's size is known: a short one is refused before allocating what it declares.
  if (std::error_code ec; in.plain()) {
    uint64_t size = fs::file_size(path, ec);
    if (!ec && size < total)
      fail(ErrorCode::data_loss, "{} file '{}' ends after {} of {} bytes", kind.what, path, size,
           total);
  }

  Tensor t(DType::uint8, shape);
  if (in.read(t.raw_data(), payload) < payload)
    fail(ErrorCode::data_loss, "{} file '{}' ends after {} of {} bytes", kind.what, path,
         in.offset(), total);

  unsigned char rest[4096];
  uint64_t trailing = 0;
  while (std::size_t got = in.read(rest, sizeof rest)) trailing += got;
  if (trailing > 0)
    fail(ErrorCode::data_loss,
         "{} file '{}' has {} trailing bytes after the {} its header declares", kind.what, path,
         trailing, total);
  return t;
}

// dir/name.gz, else dir/name; refused when neither exists.
std::string find_file(const std::string& dir, const std::string& name) {
  fs::path gz = fs::path(dir) / (name + ".gz");
  fs::path plain = fs::path(dir) / name;
  std::error_code ec;
  if (fs::exists(gz, ec)) return gz.string();
  if (fs::exists(plain, ec)) return plain.string();
  fail(ErrorCode::not_found,
       "Fashion-MNIST: neither '{}' nor '{}' exists (install the Debian package "
       "dataset-fashion-mnist, or pass the folder that holds the files)",
       gz.string(), plain.string());
}

}  // namespace

Tensor read_idx_images(const std::string& path) { return read_idx(kImages, path); }
Tensor read_idx_labels(const std::string& path) { return read_idx(kLabels, path); }

LabeledImages read_idx(const std::string& images_path, const std::string& labels_path) {
  LabeledImages data{read_idx_images(images_path), read_idx_labels(labels_path)};
  if (data.images.shape()[0] != data.labels.shape()[0])
    fail(ErrorCode::data_loss,
         "images file '{}' holds {} images but labels file '{}' holds {} labels", images_path,
         data.images.shape()[0], labels_path, data.labels.shape()[0]);
  return data;
}

struct IdxExamples::Files {
  std::string images_path, labels_path;
  std::unique_ptr<GzReader> images, labels;
};

IdxExamples::IdxExamples(const std::string& images_path, const std::string& labels_path)
    : files_(std::make_unique<Files>()) {
  files_->images_path = images_path;
  files_->labels_path = labels_path;
  files_->images = std::make_unique<GzReader>(kImages, files_->images_path);
  files_->labels = std::make_unique<GzReader>(kLabels, files_->labels_path);
  Shape images = read_header(*files_->images, kImages, files_->images_path);
  Shape labels = read_header(*files_->labels, kLabels, files_->labels_path);
  if (images[0] != labels[0])
    fail(ErrorCode::data_loss, "images file '{}' holds {} images but labels file '{}' holds {} labels",
         images_path, images[0], labels_path, labels[0]);
  count_ = images[0];
  rows_ = images[1];
  cols_ = images[2];
}

IdxExamples::~IdxExamples() = default;

bool IdxExamples::next(uint8_t* image, uint8_t* label) {
  if (read_ == count_) return false;
  const std::size_t bytes = std::size_t(rows_ * cols_);
  if (files_->images->read(image, bytes) < bytes)
    fail(ErrorCode::data_loss, "images file '{}' ends inside image {} of {}", files_->images_path, read_, count_);
  if (files_->labels->read(label, 1) < 1)
    fail(ErrorCode::data_loss, "labels file '{}' ends at label {} of {}", files_->labels_path, read_, count_);
  ++read_;
  return true;
}

std::pair<std::string, std::string> fashion_mnist_files(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  return {find_file(dir, prefix + "-images-idx3-ubyte"), find_file(dir, prefix + "-labels-idx1-ubyte")};
}

LabeledImages fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  LabeledImages data = read_idx(images_path, labels_path);

  const Shape& shape = data.images.shape();
  if (shape[1] != 28 || shape[2] != 28)
    fail(ErrorCode::data_loss, "images file '{}' holds {}x{} images, Fashion-MNIST's are 28x28",
         images_path, shape[1], shape[2]);
  const uint8_t* labels = data.labels.data<uint8_t>();
  for (int64_t i = 0; i < data.labels.num_elements(); ++i)
    if (labels[i] > 9)
      fail(ErrorCode::data_loss, "labels file '{}' holds label {} at index {}, outside 0..9",
           labels_path, labels[i], i);
  return data;
}

}  // namespace troupe::data
