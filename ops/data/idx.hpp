#pragma once
// Readers for the IDX format of MNIST and Fashion-MNIST: a big-endian header (a magic number
// whose third byte is the element type and fourth the number of dimensions, then one uint32
// per dimension) followed by the elements. Files may be plain or gzip'd; zlib reads both.
//
// Every refusal is a troupe::Error naming the file and what is wrong with it: not_found for a
// file that cannot be opened, data_loss for a wrong magic, a truncated file, trailing bytes, or
// images and labels that disagree on the count. The functions keep no state and may run
// concurrently.
#include <memory>
#include <string>
#include <utility>

#include "core/tensor.hpp"

namespace troupe::data {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // uint8, 3 dimensions
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // uint8, 1 dimension

// uint8 [N, rows, cols] from an images file.
Tensor read_idx_images(const std::string& path);
// uint8 [N] from a labels file.
Tensor read_idx_labels(const std::string& path);

struct LabeledImages {
  Tensor images;  // uint8 [N, rows, cols]
  Tensor labels;  // uint8 [N]
};
// Both files, refused when they hold different numbers of examples.
LabeledImages read_idx(const std::string& images_path, const std::string& labels_path);

// An images/labels pair read one example at a time, for a pipeline that streams its files:
// the headers are read and checked (and the counts compared) when it opens; next() reads one
// image (rows x cols bytes) and its label, false after the last, data_loss on a short file.
class IdxExamples {
 public:
  IdxExamples(const std::string& images_path, const std::string& labels_path);
  ~IdxExamples();
  int64_t count() const { return count_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool next(uint8_t* image, uint8_t* label);

 private:
  struct Files;
  std::unique_ptr<Files> files_;
  int64_t count_ = 0, rows_ = 0, cols_ = 0, read_ = 0;
};

enum class Split { train, test };
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The train (60000) or test (10000) split of Fashion-MNIST from dir, which holds the files
// under their upstream names (train-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz], ...),
// as the Debian package dataset-fashion-mnist installs them. Besides the IDX checks, refuses
// images other than 28x28 and labels outside 0..9.
LabeledImages fashion_mnist(const std::string& dir, Split split);
// The {images, labels} paths of a split in dir (the .gz files where they exist).
std::pair<std::string, std::string> fashion_mnist_files(const std::string& dir, Split split);
inline LabeledImages fashion_mnist(Split split) { return fashion_mnist(kFashionMnistDir, split); }

}  // namespace troupe::data
