#pragma once
// TFRecord framing, the container of TensorFlow's record files and of TensorBoard's event files:
// per record, its length (uint64, little endian), the masked CRC-32C of those 8 bytes, the data,
// and the masked CRC-32C of the data. Masking (rotate right by 15, add 0xa282ead8) keeps a CRC
// stored in data that is itself checksummed from cancelling out.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

// TensorFlow's masked CRC-32C of `size` bytes; masked_crc32c("hello") == 0x191c1fbb.
uint32_t masked_crc32c(const void* data, std::size_t size);

// Appends records to a file (created if missing). write() buffers; flush() writes the buffer
// out and fsyncs, so that what was flushed survives a crash. Throws unavailable naming the file
// when it cannot be opened or written.
class RecordWriter {
 public:
  explicit RecordWriter(std::string path);
  ~RecordWriter();  // flushes; an error then is lost (call flush() to see it)
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  void write(std::string_view data);
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Every record of a file, in order. Throws data_loss naming the file and the record's offset for
// a checksum that does not match or a record cut short (a file still being written ends with a
// partial record: `allow_partial_tail` drops it instead).
std::vector<std::string> read_records(const std::string& path, bool allow_partial_tail = false);

}  // namespace troupe
