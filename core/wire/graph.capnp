@0xe9205045eee20045;
# A dataflow graph: nodes with their op, inputs ("node:port", control inputs "^node"),
# requested device and attributes. Versioned like Tensor.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::wire");
using T = import "tensor.capnp";

struct AttrValue {
  union {
    i @0 :Int64;
    f @1 :Float64;
    b @2 :Bool;
    s @3 :Text;
    type @4 :T.DType;
    shape @5 :Shape;
    tensor @6 :T.Tensor;
    listI @7 :List(Int64);
    listF @8 :List(Float64);
    listS @9 :List(Text);
    listType @10 :List(T.DType);
  }
}

struct Shape {
  # unknownRank: nothing is known; otherwise one entry per dimension, -1 where unknown.
  unknownRank @0 :Bool;
  dims @1 :List(Int64);
}

struct Attr {
  name @0 :Text;
  value @1 :AttrValue;
}

struct NodeDef {
  name @0 :Text;
  op @1 :Text;
  inputs @2 :List(Text);
  device @3 :Text;
  attrs @4 :List(Attr);
}

struct GraphDef {
  version @0 :UInt32;
  nodes @1 :List(NodeDef);
}
