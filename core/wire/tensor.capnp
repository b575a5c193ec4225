@0xb4d01088b951f098;
# A tensor on the wire and on disk. Versioned: a reader refuses a version it does not know.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::wire");

enum DType {
  invalid @0;
  float32 @1;
  float16 @2;
  float64 @3;
  int32 @4;
  int64 @5;
  uint8 @6;
  bool @7;
}

struct Tensor {
  version @0 :UInt32;
  dtype @1 :DType;
  shape @2 :List(Int64);
  # The bytes, little-endian, row-major, in chunks: one Data holds at most 512 MiB - 1.
  chunks @3 :List(Data);
}
