@0xb5efe48cb8bbd19b;
# The index of a checkpoint (the file `index` in a checkpoint directory): what was saved and
# where its bytes are. The bytes themselves are raw in the data files, not in this message, so
# a tensor may exceed Cap'n Proto's 512 MiB per Data. Versioned like Tensor: a reader refuses a
# version it does not know. core/checkpoint.hpp describes the directory and the file framing.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::wire");
using T = import "tensor.capnp";

struct CheckpointEntry {
  # One saved tensor: a whole variable, or rows [rowBegin, rowBegin + rows) of it.
  name @0 :Text;
  dtype @1 :T.DType;
  fullShape @2 :List(Int64);
  rowBegin @3 :Int64;
  rows @4 :Int64;
  # Where its bytes are: a file of the checkpoint directory, little-endian, row-major.
  file @5 :Text;
  offset @6 :UInt64;
  length @7 :UInt64;
  crc32c @8 :UInt32;
}

struct CheckpointIndex {
  version @0 :UInt32;
  globalStep @1 :Int64;
  createdUnixMs @2 :Int64;
  entries @3 :List(CheckpointEntry);
}
