#pragma once
// Checkpoints on disk: saving tensors by name, publishing them atomically, restoring them
// (into the same or another split by rows), listing and verifying them. Free of Cap'n Proto:
// installed with the public headers.
//
// A checkpoint directory `dir` holds:
//   checkpoint               the pointer: one line, the name of the newest published checkpoint
//   ckpt-<step>/             one published checkpoint, never modified once published:
//     index                  what was saved (core/wire/checkpoint.capnp) and where its bytes are
//     <file>.data            the raw bytes of tensors, back to back, one file per writer
//   .tmp-<kind>-<step>-<pid>-<random>-<host>
//                            work in progress of process <pid> on <host>: a save not yet
//                            published (kind ckpt), an old checkpoint being removed (drop), the
//                            next pointer file (pointer)
//
// Saving: begin_save makes a temporary directory, each writer (a parameter shard) writes its
// own data file into it with write_data_file (fsynced), one process calls publish, which
// writes and fsyncs the index, fsyncs the temporary directory, renames it to ckpt-<step> (the
// one rename that publishes), fsyncs `dir`, replaces the pointer file (temporary file, fsync,
// rename, fsync of `dir`) and only then removes checkpoints beyond the newest max_to_keep. A
// process killed at any moment leaves the previous published checkpoint and the pointer
// intact; what it leaves behind is named .tmp-* and removed by a later begin_save.
//
// Cleanup rule: begin_save removes a .tmp-* entry only when it belongs to this host and its
// process is gone (or is this process, which knows its own live saves). Saves of several live
// processes into one directory therefore never remove each other's work; publish serialises
// the renames, the pointer and the removal of old checkpoints under an flock of `dir`.
//
// Integrity: every saved tensor carries the CRC-32C of its bytes, and the index the CRC-32C of
// itself; readers check both, and the index's version. Every error is a troupe::Error naming
// the file (and the variable): data_loss for a corrupt, truncated or missing file, a checksum
// that does not match or an unknown version; not_found for a missing checkpoint or variable;
// invalid_argument for a dtype or shape that does not fit; resource_exhausted for a full disk or
// quota; permission_denied for a directory this process may not write (EACCES, EPERM, EROFS).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace troupe::checkpoint {

inline constexpr uint32_t kFormatVersion = 1;
// The index file inside a checkpoint directory, and the pointer file in `dir`.
inline constexpr const char* kIndexFileName = "index";
inline constexpr const char* kPointerFileName = "checkpoint";

// One tensor to save: a whole variable, or rows [row_begin, row_begin + value.shape()[0]) of a
// variable whose whole shape is full_shape (a variable split by rows over shards). A
// full_shape left empty (rank 0) for a value of rank >= 1 means the whole variable.
struct SavedTensor {
  std::string name;
  Tensor value;
  Shape full_shape;
  int64_t row_begin = 0;
};

// What the index says of one saved tensor (or slice). A scalar is one row: rows == 1.
struct IndexEntry {
  std::string name;
  DType dtype = DType::invalid;
  Shape full_shape;
  int64_t row_begin = 0;
  int64_t rows = 0;
  std::string file;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t crc32c = 0;
};

struct Index {
  uint32_t version = kFormatVersion;
  int64_t global_step = 0;
  int64_t created_unix_ms = 0;
  std::vector<IndexEntry> entries;
};

// Checks that checkpoints can be written into `dir` (created if need be) as a save writes them:
// a file created, written, fsynced and removed. Throws naming `dir` and errno:
// permission_denied (EACCES, EPERM, EROFS), resource_exhausted (ENOSPC, EDQUOT), else
// unavailable. What a job that will save runs before its first step.
void check_writable(const std::string& dir);

// ---- Save, in three steps (each shard writes its own file, in parallel; one process publishes)

// 1. Removes temporary entries left in `dir` by saves that died (the cleanup rule above),
//    creates `dir` if needed and a fresh temporary directory inside it; returns its path.
std::string begin_save(const std::string& dir, int64_t global_step);

// 2. Writes the data file `file_name` (a plain name such as "shard-00000-of-00002.data") in
//    the temporary directory: the tensors' bytes back to back, each with its crc32c, written
//    with large write() calls and fsynced. Returns one entry per tensor. Thread-safe for
//    distinct file names. A full disk is resource_exhausted naming ENOSPC and the file.
std::vector<IndexEntry> write_data_file(const std::string& temp_dir, const std::string& file_name,
                                        const std::vector<SavedTensor>& tensors);
// The same, letting go of each tensor's value as soon as its bytes are written: a parameter
// shard that updates a variable after that does not have to copy it (the snapshot no longer
// holds its buffer).
std::vector<IndexEntry> write_data_file(const std::string& temp_dir, const std::string& file_name,
                                        std::vector<SavedTensor>&& tensors);

// 3. Checks that the entries cover every variable's rows exactly once with one dtype and full
//    shape, writes the index, fsyncs, renames the temporary directory to dir/ckpt-<step> (an
//    existing one of that step is replaced atomically), fsyncs `dir`, replaces the pointer
//    file atomically, then removes published checkpoints beyond the newest max_to_keep (the
//    new one, then the others by decreasing step; max_to_keep <= 0 keeps all). Returns the
//    published path. On failure nothing published is touched; call abandon(temp_dir).
std::string publish(const std::string& dir, const std::string& temp_dir, int64_t global_step,
                    std::vector<IndexEntry> entries, int max_to_keep);

// A save that failed: removes its temporary directory (never a published checkpoint).
void abandon(const std::string& temp_dir) noexcept;

// ---- Read

// The index of the checkpoint at `checkpoint_path` (a ckpt-<step> directory), checked: its
// framing, crc32c, version and every entry's consistency (not the data files).
Index read_index(const std::string& checkpoint_path);

// The newest published checkpoint named by dir/checkpoint; nullopt when there is none (no
// `dir` or no pointer file). The pointer must hold one name of the form ckpt-<step> (the
// checkpoint is then always inside `dir`): anything else, and a pointer naming a checkpoint
// that is gone, is data_loss naming the pointer file.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// The step of a published checkpoint's name "ckpt-<step>" (digits, no sign, no leading zero);
// nullopt for any other name, a path among them.
std::optional<int64_t> checkpoint_step(const std::string& name);

// The checkpoint `name` ("ckpt-400") in `dir`: its path, checked to be a published checkpoint
// there (it holds an index). A name not of the form ckpt-<step> is invalid_argument, one that
// is not there not_found naming what `dir` holds.
std::string named_checkpoint(const std::string& dir, const std::string& name);

// The newest checkpoint in `dir` older than `below` (a step; none: every one) whose every byte
// verifies (verify() below), or nullopt when there is none: what to restore from when the
// newest is damaged.
std::optional<std::string> newest_intact_checkpoint(const std::string& dir,
                                                    std::optional<int64_t> below = std::nullopt);

// The published checkpoints in `dir` (directories ckpt-<step>), by increasing step; empty
// when there are none or no `dir`.
std::vector<std::string> all_checkpoints(const std::string& dir);

// What a restore asks for: the whole variable (rows = -1) or rows [row_begin, row_begin + rows).
struct Request {
  std::string name;
  DType dtype = DType::invalid;
  Shape full_shape;
  int64_t row_begin = 0;
  int64_t rows = -1;
};

// Reads and verifies (crc32c) every requested tensor, assembling each from whichever saved
// slices cover it (resharding: saved whole, restored split, or the reverse). All or nothing:
// it returns every tensor (in the order of `requests`) or throws.
std::vector<Tensor> read(const std::string& checkpoint_path, const std::vector<Request>& requests);

// Reads every byte of every saved tensor and checks its crc32c, holding only a few MiB at a
// time; returns the index.
Index verify(const std::string& checkpoint_path);

// ---- The index's bytes (the file `index`), for tools and the fuzzer

// "TRCKPIDX", the CRC-32C of the message (little-endian uint32), 4 zero bytes, then the
// Cap'n Proto message (core/wire/checkpoint.capnp).
std::vector<unsigned char> index_to_bytes(const Index& index);
// Parses and checks an index; any malformed input is data_loss naming `where`. Bounded in time
// and memory by the input's size.
Index parse_index(const unsigned char* data, std::size_t size, const std::string& where);

}  // namespace troupe::checkpoint
