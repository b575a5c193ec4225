#include "ops/data/queue.hpp"

#include <algorithm>
#include <cstring>

#include "ops/kernel.hpp"

namespace troupe {
namespace {

const char* kind_name(QueueKind k) {
  switch (k) {
    case QueueKind::fifo: return "FIFOQueue";
    case QueueKind::padding_fifo: return "PaddingFIFOQueue";
    case QueueKind::random_shuffle: return "RandomShuffleQueue";
  }
  return "?";
}

// Shapes as one flat attribute: per component its rank (-1: unknown) and then its dims.
std::vector<int64_t> flatten(const std::vector<PartialShape>& shapes) {
  std::vector<int64_t> out;
  for (auto& s : shapes) {
    out.push_back(s.rank());
    if (s.rank_known()) out.insert(out.end(), s.dims().begin(), s.dims().end());
  }
  return out;
}

std::vector<PartialShape> unflatten(const std::vector<int64_t>& flat) {
  std::vector<PartialShape> out;
  for (std::size_t i = 0; i < flat.size();) {
    int64_t rank = flat[i++];
    if (rank < 0) {
      out.push_back(PartialShape::unknown());
      continue;
    }
    out.push_back(PartialShape::from_dims(std::vector<int64_t>(flat.begin() + std::ptrdiff_t(i),
                                                              flat.begin() + std::ptrdiff_t(i + std::size_t(rank)))));
    i += std::size_t(rank);
  }
  return out;
}

const std::vector<std::string> kSpecAttrs = {"shared_name", "queue_kind", "component_types", "shapes",
                                             "capacity", "min_after_dequeue", "seed"};

int num_components(const AttrMap& a) {
  return int(get_attr<std::vector<DType>>(a, "component_types", "queue op").size());
}

void no_outputs(InferenceContext&) {}

// Dequeue's outputs: the components' dtypes and shapes; DequeueMany's with a batch dimension.
void dequeue_shapes(InferenceContext& c, bool many) {
  QueueSpec spec = QueueSpec::from(c.attrs(), c.node_name());
  if (many && (c.input_type(0) != DType::int32))
    c.error("n must be int32, got {}", name_of(c.input_type(0)));
  for (std::size_t i = 0; i < spec.types.size(); ++i) {
    PartialShape s = i < spec.shapes.size() ? spec.shapes[i] : PartialShape::unknown();
    if (many) {
      int64_t n = -1;
      if (const Tensor* v = c.input_value(0)) n = v->scalar_value<int32_t>();
      if (get_attr_or<bool>(c.attrs(), "allow_smaller_final_batch", false)) n = -1;
      if (s.rank_known()) {
        std::vector<int64_t> dims = {n};
        dims.insert(dims.end(), s.dims().begin(), s.dims().end());
        if (spec.kind == QueueKind::padding_fifo)
          for (std::size_t d = 1; d < dims.size(); ++d) dims[d] = dims[d] >= 0 ? dims[d] : -1;
        s = PartialShape::from_dims(dims);
      }
    }
    c.set_output(int(i), spec.types[i], s);
  }
}

void enqueue_shapes(InferenceContext& c, bool many) {
  QueueSpec spec = QueueSpec::from(c.attrs(), c.node_name());
  if (c.num_inputs() != int(spec.types.size()))
    c.error("{} takes {} component(s), got {}", spec.describe(), spec.types.size(), c.num_inputs());
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_type(i) != spec.types[std::size_t(i)])
      c.error("component {} of {} is {}, got {}", i, spec.describe(), name_of(spec.types[std::size_t(i)]),
              name_of(c.input_type(i)));
    if (std::size_t(i) >= spec.shapes.size() || !spec.shapes[std::size_t(i)].rank_known() ||
        !c.input_shape(i).rank_known())
      continue;
    PartialShape want = spec.shapes[std::size_t(i)];
    if (many) {
      std::vector<int64_t> dims = {-1};
      dims.insert(dims.end(), want.dims().begin(), want.dims().end());
      want = PartialShape::from_dims(dims);
    }
    if (!want.compatible_with(c.input_shape(i)))
      c.error("component {} of {} has shape {}{}, got {}", i, spec.describe(), many ? "[n]+" : "",
              spec.shapes[std::size_t(i)].to_string(), c.input_shape(i).to_string());
  }
}

TROUPE_REGISTER_OP(OpDef{.name = "QueueEnqueue", .num_inputs = -1, .num_outputs = 0, .stateful = true,
                         .queue_op = true, .shape_fn = [](InferenceContext& c) { enqueue_shapes(c, false); },
                         .required_attrs = kSpecAttrs});
TROUPE_REGISTER_OP(OpDef{.name = "QueueEnqueueMany", .num_inputs = -1, .num_outputs = 0, .stateful = true,
                         .queue_op = true, .shape_fn = [](InferenceContext& c) { enqueue_shapes(c, true); },
                         .required_attrs = kSpecAttrs});
TROUPE_REGISTER_OP(OpDef{.name = "QueueDequeue", .num_inputs = 0, .num_outputs = -1, .num_outputs_fn = num_components,
                         .stateful = true, .queue_op = true,
                         .shape_fn = [](InferenceContext& c) { dequeue_shapes(c, false); },
                         .required_attrs = kSpecAttrs});
TROUPE_REGISTER_OP(OpDef{.name = "QueueDequeueMany", .num_inputs = 1, .num_outputs = -1,
                         .num_outputs_fn = num_components, .stateful = true, .queue_op = true,
                         .shape_fn = [](InferenceContext& c) { dequeue_shapes(c, true); },
                         .required_attrs = kSpecAttrs});
TROUPE_REGISTER_OP(OpDef{.name = "QueueClose", .num_inputs = 0, .num_outputs = 0, .stateful = true,
                         .queue_op = true, .shape_fn = no_outputs, .required_attrs = kSpecAttrs});
TROUPE_REGISTER_OP(OpDef{.name = "QueueSize", .num_inputs = 0, .stateful = true, .queue_op = true,
                         .shape_fn = [](InferenceContext& c) { c.set_output(0, DType::int32, Shape{}); },
                         .required_attrs = kSpecAttrs});

// Copies `src` (shape s) into `dst` (shape d, each dim >= s's), zero elsewhere already.
void copy_padded(const char* src, const Shape& s, char* dst, const Shape& d, std::size_t item, int dim) {
  if (s.rank() == 0) {
    std::memcpy(dst, src, item);
    return;
  }
  if (dim == s.rank() - 1) {
    std::memcpy(dst, src, std::size_t(s[dim]) * item);
    return;
  }
  std::size_t src_stride = item, dst_stride = item;
  for (int k = dim + 1; k < s.rank(); ++k) src_stride *= std::size_t(s[k]), dst_stride *= std::size_t(d[k]);
  for (int64_t i = 0; i < s[dim]; ++i)
    copy_padded(src + std::size_t(i) * src_stride, s, dst + std::size_t(i) * dst_stride, d, item, dim + 1);
}

}  // namespace

AttrMap QueueSpec::attrs() const {
  return {{"shared_name", name},
          {"queue_kind", int64_t(kind)},
          {"component_types", types},
          {"shapes", flatten(shapes)},
          {"capacity", capacity},
          {"min_after_dequeue", min_after_dequeue},
          {"seed", seed}};
}

QueueSpec QueueSpec::from(const AttrMap& a, const std::string& owner) {
  QueueSpec s;
  s.name = get_attr<std::string>(a, "shared_name", owner);
  s.kind = QueueKind(get_attr<int64_t>(a, "queue_kind", owner));
  s.types = get_attr<std::vector<DType>>(a, "component_types", owner);
  s.shapes = unflatten(get_attr<std::vector<int64_t>>(a, "shapes", owner));
  s.capacity = get_attr<int64_t>(a, "capacity", owner);
  s.min_after_dequeue = get_attr<int64_t>(a, "min_after_dequeue", owner);
  s.seed = get_attr<int64_t>(a, "seed", owner);
  return s;
}

bool QueueSpec::operator==(const QueueSpec& o) const {
  if (name != o.name || kind != o.kind || types != o.types || capacity != o.capacity ||
      min_after_dequeue != o.min_after_dequeue || seed != o.seed || shapes.size() != o.shapes.size())
    return false;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i].to_string() != o.shapes[i].to_string()) return false;
  return true;
}

std::string QueueSpec::describe() const {
  std::string parts;
  for (std::size_t i = 0; i < types.size(); ++i) {
    parts += (i ? ", " : "") + std::string(name_of(types[i]));
    if (i < shapes.size()) parts += " " + shapes[i].to_string();
  }
  std::string out = fmt::format("{} '{}' ({}", kind_name(kind), name, parts);
  if (capacity >= 0) out += fmt::format(", capacity {}", capacity);
  return out + ")";
}

namespace queue_elements {

void check(const QueueSpec& spec, const std::vector<Tensor>& element) {
  if (element.size() != spec.types.size())
    fail(ErrorCode::invalid_argument, "{}: an element has {} component(s), the queue takes {}", spec.describe(),
         element.size(), spec.types.size());
  for (std::size_t i = 0; i < element.size(); ++i) {
    if (element[i].dtype() != spec.types[i])
      fail(ErrorCode::invalid_argument, "{}: component {} is {}, the queue takes {}", spec.describe(), i,
           name_of(element[i].dtype()), name_of(spec.types[i]));
    if (i < spec.shapes.size() && !spec.shapes[i].compatible_with(element[i].shape()))
      fail(ErrorCode::invalid_argument, "{}: component {} has shape {}, the queue takes {}", spec.describe(), i,
           element[i].shape().to_string(), spec.shapes[i].to_string());
  }
}

std::vector<std::vector<Tensor>> split(const QueueSpec& spec, const std::vector<Tensor>& components) {
  if (components.size() != spec.types.size())
    fail(ErrorCode::invalid_argument, "{}: enqueue_many got {} component(s), the queue takes {}", spec.describe(),
         components.size(), spec.types.size());
  int64_t n = -1;
  for (std::size_t i = 0; i < components.size(); ++i) {
    const Tensor& c = components[i];
    if (c.shape().rank() < 1)
      fail(ErrorCode::invalid_argument, "{}: enqueue_many's component {} must have a first dimension, got {}",
           spec.describe(), i, c.describe());
    if (n >= 0 && c.shape()[0] != n)
      fail(ErrorCode::invalid_argument, "{}: enqueue_many's components disagree on the number of elements ({} and {})",
           spec.describe(), n, c.shape()[0]);
    n = c.shape()[0];
  }
  std::vector<std::vector<Tensor>> out(std::size_t(std::max<int64_t>(n, 0)));
  for (const Tensor& c : components) {
    std::vector<int64_t> dims(c.shape().begin() + 1, c.shape().end());
    Shape one(dims);
    const std::size_t bytes = std::size_t(one.num_elements()) * size_of(c.dtype());
    for (int64_t k = 0; k < n; ++k) {
      Tensor t(c.dtype(), one);
      std::memcpy(t.raw_data(), static_cast<const char*>(c.raw_data()) + std::size_t(k) * bytes, bytes);
      out[std::size_t(k)].push_back(std::move(t));
    }
  }
  for (auto& e : out) check(spec, e);
  return out;
}

std::vector<Tensor> stack(const QueueSpec& spec, const std::vector<std::vector<Tensor>>& elements) {
  std::vector<Tensor> out;
  const int64_t n = int64_t(elements.size());
  for (std::size_t c = 0; c < spec.types.size(); ++c) {
    // The batch's element shape: the common shape, or (padding) the largest of each dim.
    Shape first = n ? elements[0][c].shape() : Shape{};
    std::vector<int64_t> dims = first.dims();
    if (!n && c < spec.shapes.size() && spec.shapes[c].rank_known())
      for (int64_t d : spec.shapes[c].dims()) dims.push_back(std::max<int64_t>(d, 0));
    for (const auto& e : elements) {
      const Shape& s = e[c].shape();
      bool same = s == first;
      if (!same && spec.kind != QueueKind::padding_fifo)
        fail(ErrorCode::invalid_argument,
             "{}: dequeue_many found elements of shapes {} and {} in component {} (a PaddingFIFOQueue pads them)",
             spec.describe(), first.to_string(), s.to_string(), c);
      if (s.rank() != int(dims.size()))
        fail(ErrorCode::invalid_argument, "{}: component {} has elements of ranks {} and {}", spec.describe(), c,
             dims.size(), s.rank());
      for (int d = 0; d < s.rank(); ++d) dims[std::size_t(d)] = std::max(dims[std::size_t(d)], s[d]);
    }
    std::vector<int64_t> batch_dims = {n};
    batch_dims.insert(batch_dims.end(), dims.begin(), dims.end());
    Shape element_shape(dims);
    Tensor batch = Tensor::zeros(spec.types[c], Shape(batch_dims));
    const std::size_t item = size_of(spec.types[c]);
    const std::size_t stride = std::size_t(element_shape.num_elements()) * item;
    for (int64_t k = 0; k < n; ++k) {
      const Tensor& t = elements[std::size_t(k)][c];
      char* dst = static_cast<char*>(batch.raw_data()) + std::size_t(k) * stride;
      if (t.shape() == element_shape) std::memcpy(dst, t.raw_data(), stride);
      else copy_padded(static_cast<const char*>(t.raw_data()), t.shape(), dst, element_shape, item, 0);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace queue_elements

namespace ops {

Queue::Queue(const Scope& scope, QueueKind kind, std::vector<DType> types, std::vector<PartialShape> shapes,
             const QueueOptions& o) {
  TROUPE_CHECK_ARG(!types.empty(), "a queue needs at least one component type");
  TROUPE_CHECK_ARG(shapes.empty() || shapes.size() == types.size(), "a queue of {} component(s) given {} shapes",
                   types.size(), shapes.size());
  TROUPE_CHECK_ARG(o.capacity != 0 && o.capacity >= -1, "a queue's capacity must be positive (or -1: unbounded), got {}",
                   o.capacity);
  TROUPE_CHECK_ARG(o.min_after_dequeue >= 0, "min_after_dequeue must not be negative");
  if (kind == QueueKind::padding_fifo)
    for (auto& s : shapes)
      TROUPE_CHECK_ARG(s.rank_known(), "a PaddingFIFOQueue needs each component's rank (dims may be -1)");
  if (kind == QueueKind::padding_fifo) TROUPE_CHECK_ARG(!shapes.empty(), "a PaddingFIFOQueue needs shapes");
  spec_.name = o.shared_name.empty() ? scope.unique_name(kind_name(kind)) : o.shared_name;
  spec_.kind = kind;
  spec_.types = std::move(types);
  spec_.shapes = std::move(shapes);
  spec_.capacity = o.capacity;
  spec_.min_after_dequeue = o.min_after_dequeue;
  spec_.seed = o.seed;
}

Queue Queue::fifo(const Scope& s, std::vector<DType> t, std::vector<PartialShape> sh, QueueOptions o) {
  return Queue(s, QueueKind::fifo, std::move(t), std::move(sh), o);
}
Queue Queue::padding_fifo(const Scope& s, std::vector<DType> t, std::vector<PartialShape> sh, QueueOptions o) {
  return Queue(s, QueueKind::padding_fifo, std::move(t), std::move(sh), o);
}
Queue Queue::random_shuffle(const Scope& s, std::vector<DType> t, std::vector<PartialShape> sh, QueueOptions o) {
  return Queue(s, QueueKind::random_shuffle, std::move(t), std::move(sh), o);
}

Node* Queue::enqueue(const Scope& scope, const std::vector<Output>& element) const {
  return &scope.add("QueueEnqueue", element, spec_.attrs());
}

Node* Queue::enqueue_many(const Scope& scope, const std::vector<Output>& components) const {
  return &scope.add("QueueEnqueueMany", components, spec_.attrs());
}

std::vector<Output> Queue::dequeue(const Scope& scope) const {
  Node& n = scope.add("QueueDequeue", {}, spec_.attrs());
  std::vector<Output> out;
  for (int i = 0; i < n.num_outputs(); ++i) out.push_back(Output(&n, i));
  return out;
}

std::vector<Output> Queue::dequeue_many(const Scope& scope, Output count, bool allow_smaller_final_batch) const {
  AttrMap a = spec_.attrs();
  a["allow_smaller_final_batch"] = allow_smaller_final_batch;
  Node& n = scope.add("QueueDequeueMany", {count}, a);
  std::vector<Output> out;
  for (int i = 0; i < n.num_outputs(); ++i) out.push_back(Output(&n, i));
  return out;
}

Node* Queue::close(const Scope& scope, bool cancel_pending_enqueues) const {
  AttrMap a = spec_.attrs();
  a["cancel_pending_enqueues"] = cancel_pending_enqueues;
  return &scope.add("QueueClose", {}, a);
}

Output Queue::size(const Scope& scope) const { return Output(&scope.add("QueueSize", {}, spec_.attrs())); }

}  // namespace ops
}  // namespace troupe
