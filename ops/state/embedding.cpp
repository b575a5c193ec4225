#include "ops/state/embedding.hpp"

#include <cstring>

#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

bool is_index(DType t) { return t == DType::int32 || t == DType::int64; }

// The index at position i of an int32 or int64 tensor.
int64_t index_at(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::int32 ? int64_t(indices.data<int32_t>()[i]) : indices.data<int64_t>()[i];
}

// leading + shape[1:]
PartialShape rows_shape(const PartialShape& leading, const PartialShape& shape) {
  if (!leading.rank_known() || !shape.rank_known()) return PartialShape::unknown();
  std::vector<int64_t> dims = leading.dims();
  for (int d = 1; d < shape.rank(); ++d) dims.push_back(shape.dim(d));
  return PartialShape::from_dims(dims);
}
Shape rows_shape(const Shape& leading, const Shape& shape) {
  Shape out = leading;
  for (int d = 1; d < shape.rank(); ++d) out.push_back(shape[d]);
  return out;
}

// The bytes of one row of a tensor whose first `leading` dimensions index its rows.
std::size_t row_bytes(const Tensor& t, int leading) {
  int64_t n = 1;
  for (int d = leading; d < t.shape().rank(); ++d) n *= t.shape()[d];
  return std::size_t(n) * size_of(t.dtype());
}

void check_indices(InferenceContext& c, int i, const char* what) {
  if (!is_index(c.input_type(i))) c.error("{} must be int32 or int64, got {}", what, name_of(c.input_type(i)));
}

// Gather(params, indices) -> params[indices]
TROUPE_REGISTER_OP(OpDef{
    .name = "Gather",
    .num_inputs = 2,
    .shape_fn = [](InferenceContext& c) {
      check_indices(c, 1, "indices");
      const auto& params = c.input_shape(0);
      if (params.rank_known() && params.rank() < 1) c.error("params is a scalar: it has no rows to gather");
      c.set_output(0, c.input_type(0), rows_shape(c.input_shape(1), params));
    }});

class GatherKernel final : public OpKernel {
 public:
  explicit GatherKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    if (params.shape().rank() < 1) fail(ErrorCode::invalid_argument, "params {} has no rows to gather", params.describe());
    const int64_t rows = params.shape()[0];
    Tensor& out = ctx.allocate_output(0, params.dtype(), rows_shape(indices.shape(), params.shape()));
    const std::size_t width = row_bytes(params, 1);
    auto* src = static_cast<const unsigned char*>(params.raw_data());
    auto* dst = static_cast<unsigned char*>(out.raw_data());
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      const int64_t row = index_at(indices, i);
      if (row < 0 || row >= rows)
        fail(ErrorCode::invalid_argument, "index {} (position {} of {}) is outside the {} rows of {}", row, i,
             indices.describe(), rows, params.describe());
      std::memcpy(dst + std::size_t(i) * width, src + std::size_t(row) * width, width);
    }
  }
};
TROUPE_REGISTER_KERNEL("Gather", DeviceType::cpu, GatherKernel);

// GatherGrad(params, indices, grad) -> zeros shaped like params, grad's rows added at indices.
TROUPE_REGISTER_OP(OpDef{
    .name = "GatherGrad",
    .num_inputs = 3,
    .shape_fn = [](InferenceContext& c) {
      check_indices(c, 1, "indices");
      c.set_output(0, c.input_type(0), c.input_shape(0));
    }});

class GatherGradKernel final : public OpKernel {
 public:
  explicit GatherGradKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    if (grad.dtype() != params.dtype() || grad.shape() != rows_shape(indices.shape(), params.shape()))
      fail(ErrorCode::invalid_argument, "gradient {} does not fit rows {} of {}", grad.describe(), indices.describe(),
           params.describe());
    Tensor& out = ctx.allocate_output(0, params.dtype(), params.shape());
    std::memset(out.raw_data(), 0, out.byte_size());
    const int64_t rows = params.shape()[0];
    const int64_t width = params.shape()[0] ? params.num_elements() / rows : 0;
    visit_dtype(params.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T>) {
        T* o = out.data<T>();
        const T* g = grad.data<T>();
        for (int64_t i = 0; i < indices.num_elements(); ++i) {
          const int64_t row = index_at(indices, i);
          if (row < 0 || row >= rows)
            fail(ErrorCode::invalid_argument, "index {} is outside the {} rows of {}", row, rows, params.describe());
          for (int64_t e = 0; e < width; ++e) o[row * width + e] += g[i * width + e];
        }
      } else {
        fail(ErrorCode::invalid_argument, "the gradient of a gather is float32 or float64, got {}", grad.describe());
      }
    });
  }
};
TROUPE_REGISTER_KERNEL("GatherGrad", DeviceType::cpu, GatherGradKernel);

TROUPE_REGISTER_GRADIENT("Gather", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  return std::vector<Output>{Output(&s.add("GatherGrad", {input_of(s, n, 0), input_of(s, n, 1), g[0]})), Output()};
});
const bool gather_grad_gradient = (GradientRegistry::global().add_none("GatherGrad"), true);

// PartitionIds(ids) -> for each part k: the ids it holds, made local to it (id - begin_k), and
// their positions in ids (flattened); attr "row_begins": the parts' first rows, then the rows.
TROUPE_REGISTER_OP(OpDef{
    .name = "PartitionIds",
    .num_inputs = 1,
    .num_outputs = -1,
    .num_outputs_fn = [](const AttrMap& a) { return 2 * (int(std::get<std::vector<int64_t>>(a.at("row_begins")).size()) - 1); },
    .shape_fn = [](InferenceContext& c) {
      check_indices(c, 0, "ids");
      const auto& begins = c.attr<std::vector<int64_t>>("row_begins");
      if (begins.size() < 2) c.error("row_begins needs the first row of each part and the number of rows");
      for (std::size_t k = 1; k < begins.size(); ++k)
        if (begins[k] <= begins[k - 1]) c.error("row_begins [{}] must increase", fmt::join(begins, ","));
      for (int k = 0; k < 2 * (int(begins.size()) - 1); ++k) c.set_output(k, DType::int64, PartialShape{-1});
    },
    .required_attrs = {"row_begins"}});

class PartitionIdsKernel final : public OpKernel {
 public:
  explicit PartitionIdsKernel(const Node& n) : begins_(get_attr<std::vector<int64_t>>(n.attrs, "row_begins", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    const int parts = int(begins_.size()) - 1;
    const int64_t rows = begins_.back();
    std::vector<int> part_of(std::size_t(ids.num_elements()));
    std::vector<int64_t> count(std::size_t(parts), 0);
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      const int64_t id = index_at(ids, i);
      if (id < 0 || id >= rows)
        fail(ErrorCode::invalid_argument, "id {} (position {} of {}) is outside the table's {} rows", id, i,
             ids.describe(), rows);
      const int k = int(std::upper_bound(begins_.begin(), begins_.end(), id) - begins_.begin()) - 1;
      part_of[std::size_t(i)] = k;
      ++count[std::size_t(k)];
    }
    std::vector<int64_t*> local(std::size_t(parts), nullptr), position(std::size_t(parts), nullptr);
    for (int k = 0; k < parts; ++k) {
      local[std::size_t(k)] = ctx.allocate_output(2 * k, DType::int64, Shape{count[std::size_t(k)]}).data<int64_t>();
      position[std::size_t(k)] = ctx.allocate_output(2 * k + 1, DType::int64, Shape{count[std::size_t(k)]}).data<int64_t>();
    }
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      const auto k = std::size_t(part_of[std::size_t(i)]);
      *local[k]++ = index_at(ids, i) - begins_[k];
      *position[k]++ = i;
    }
  }

 private:
  std::vector<int64_t> begins_;
};
TROUPE_REGISTER_KERNEL("PartitionIds", DeviceType::cpu, PartitionIdsKernel);
const bool partition_ids_gradient = (GradientRegistry::global().add_none("PartitionIds"), true);

// StitchRows(ids, positions_0.., rows_0..) -> ids.shape + row shape: rows_k[j] goes to
// position positions_k[j] of the flattened ids. attr "num_parts".
TROUPE_REGISTER_OP(OpDef{
    .name = "StitchRows",
    .num_inputs = -1,
    .shape_fn = [](InferenceContext& c) {
      const int parts = int(c.attr<int64_t>("num_parts"));
      if (parts < 1 || c.num_inputs() != 1 + 2 * parts)
        c.error("takes the ids, then {} positions and {} rows, got {} inputs", parts, parts, c.num_inputs());
      check_indices(c, 0, "ids");
      for (int k = 0; k < parts; ++k) {
        if (c.input_type(1 + k) != DType::int64) c.error("positions {} must be int64", k);
        if (c.input_type(1 + parts + k) != c.input_type(1 + parts)) c.error("the parts' rows differ in dtype");
      }
      c.set_output(0, c.input_type(1 + parts), rows_shape(c.input_shape(0), c.input_shape(1 + parts)));
    },
    .required_attrs = {"num_parts"}});

class StitchRowsKernel final : public OpKernel {
 public:
  explicit StitchRowsKernel(const Node& n) : parts_(int(get_attr<int64_t>(n.attrs, "num_parts", n.name))) {}
  void compute(KernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    const Tensor& first = ctx.input(1 + parts_);
    Tensor& out = ctx.allocate_output(0, first.dtype(), rows_shape(ids.shape(), first.shape()));
    const std::size_t width = row_bytes(first, 1);
    auto* dst = static_cast<unsigned char*>(out.raw_data());
    int64_t filled = 0;
    for (int k = 0; k < parts_; ++k) {
      const Tensor& positions = ctx.input(1 + k);
      const Tensor& rows = ctx.input(1 + parts_ + k);
      if (rows.dtype() != first.dtype() || row_bytes(rows, 1) != width || rows.shape()[0] != positions.num_elements())
        fail(ErrorCode::invalid_argument, "part {}'s rows {} do not fit its {} positions and the rows of part 0 {}", k,
             rows.describe(), positions.num_elements(), first.describe());
      auto* src = static_cast<const unsigned char*>(rows.raw_data());
      for (int64_t j = 0; j < positions.num_elements(); ++j) {
        const int64_t at = positions.data<int64_t>()[j];
        if (at < 0 || at >= ids.num_elements())
          fail(ErrorCode::invalid_argument, "position {} of part {} is outside the {} ids", at, k, ids.num_elements());
        std::memcpy(dst + std::size_t(at) * width, src + std::size_t(j) * width, width);
      }
      filled += positions.num_elements();
    }
    if (filled != ids.num_elements())
      fail(ErrorCode::invalid_argument, "the parts hold {} rows for {} ids", filled, ids.num_elements());
  }

 private:
  int parts_;
};
TROUPE_REGISTER_KERNEL("StitchRows", DeviceType::cpu, StitchRowsKernel);

// UnstitchRows(grad, ids, positions) -> the rows of grad (ids.shape + row shape) at positions.
TROUPE_REGISTER_OP(OpDef{
    .name = "UnstitchRows",
    .num_inputs = 3,
    .shape_fn = [](InferenceContext& c) {
      const auto& grad = c.input_shape(0);
      const auto& ids = c.input_shape(1);
      if (!grad.rank_known() || !ids.rank_known()) {
        c.set_output(0, c.input_type(0), PartialShape::unknown());
        return;
      }
      std::vector<int64_t> dims{c.input_shape(2).rank_known() && c.input_shape(2).rank() == 1 ? c.input_shape(2).dim(0) : -1};
      for (int d = ids.rank(); d < grad.rank(); ++d) dims.push_back(grad.dim(d));
      c.set_output(0, c.input_type(0), PartialShape::from_dims(dims));
    }});

class UnstitchRowsKernel final : public OpKernel {
 public:
  explicit UnstitchRowsKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& grad = ctx.input(0);
    const Tensor& ids = ctx.input(1);
    const Tensor& positions = ctx.input(2);
    Shape shape{positions.num_elements()};
    for (int d = ids.shape().rank(); d < grad.shape().rank(); ++d) shape.push_back(grad.shape()[d]);
    Tensor& out = ctx.allocate_output(0, grad.dtype(), shape);
    const std::size_t width = row_bytes(grad, ids.shape().rank());
    auto* src = static_cast<const unsigned char*>(grad.raw_data());
    auto* dst = static_cast<unsigned char*>(out.raw_data());
    for (int64_t j = 0; j < positions.num_elements(); ++j) {
      const int64_t at = positions.data<int64_t>()[j];
      if (at < 0 || at >= ids.num_elements())
        fail(ErrorCode::invalid_argument, "position {} is outside the {} ids", at, ids.num_elements());
      std::memcpy(dst + std::size_t(j) * width, src + std::size_t(at) * width, width);
    }
  }
};
TROUPE_REGISTER_KERNEL("UnstitchRows", DeviceType::cpu, UnstitchRowsKernel);
const bool unstitch_gradient = (GradientRegistry::global().add_none("UnstitchRows"), true);

TROUPE_REGISTER_GRADIENT("StitchRows", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  const int parts = int(get_attr<int64_t>(n.attrs, "num_parts", n.name));
  std::vector<Output> out(std::size_t(1 + 2 * parts));
  const Output ids = input_of(s, n, 0);
  for (int k = 0; k < parts; ++k)
    out[std::size_t(1 + parts + k)] = Output(&s.add("UnstitchRows", {g[0], ids, input_of(s, n, 1 + k)}));
  return out;
});

}  // namespace

namespace ops {

Output gather(const Scope& scope, Output params, Output indices) {
  return &scope.add("Gather", {params, indices});
}

Output embedding_lookup(const Scope& scope, Output params, Output ids) {
  TROUPE_CHECK_ARG(params && params.node()->op == "VariableV2", "embedding_lookup: params must be a variable, got {}",
                   params ? params.node()->describe() : "an empty Output");
  return gather(scope.colocate_with(params).with_op_name("embedding_lookup"), params, ids);
}

Output embedding_lookup(const Scope& scope, const PartitionedVariable& params, Output ids) {
  TROUPE_CHECK_ARG(!params.parts.empty(), "embedding_lookup: the partitioned variable has no parts");
  if (params.parts.size() == 1) return embedding_lookup(scope, params.parts[0], ids);
  Scope s = scope.sub("embedding_lookup");
  std::vector<int64_t> begins;
  int64_t rows = 0;
  for (auto& part : params.parts) {
    auto where = partition_of(*part.node());
    TROUPE_CHECK_ARG(where && part.shape().rank_known() && part.shape().rank() >= 1,
                     "embedding_lookup: {} is no part of a partitioned variable", part.node()->describe());
    TROUPE_CHECK_ARG(where->row_begin == rows, "embedding_lookup: part '{}' begins at row {}, expected {}",
                     part.node()->name, where->row_begin, rows);
    begins.push_back(rows);
    rows += part.shape().dim(0);
  }
  begins.push_back(rows);
  const int parts = int(params.parts.size());
  Node& split = s.add("PartitionIds", {ids}, {{"row_begins", begins}});
  std::vector<Output> inputs{ids};
  for (int k = 0; k < parts; ++k) inputs.push_back(Output(&split, 2 * k + 1));
  for (int k = 0; k < parts; ++k) {
    const Output& part = params.parts[std::size_t(k)];
    inputs.push_back(gather(s.colocate_with(part).with_op_name(fmt::format("part_{}", k)), part, Output(&split, 2 * k)));
  }
  return &s.add("StitchRows", inputs, {{"num_parts", int64_t(parts)}});
}

PartitionedVariable partitioned_variable(const Scope& scope, const std::string& name, Output initial_value,
                                         const Partitioner& partitioner, VariableOptions options) {
  TROUPE_CHECK_ARG(initial_value && initial_value.shape().fully_defined(),
                   "partitioned_variable '{}': the initial value needs a fully defined shape", name);
  return partitioned_variable(scope, name, initial_value,
                              partitioner.parts_for(initial_value.shape().to_shape(), initial_value.dtype()), options);
}

}  // namespace ops

int ops::Partitioner::parts_for(const Shape& shape, DType dtype) const {
  TROUPE_CHECK_ARG(max_part_bytes > 0, "Partitioner: max_part_bytes must be positive, got {}", max_part_bytes);
  TROUPE_CHECK_ARG(shape.rank() >= 1, "Partitioner: a scalar cannot be split by rows");
  const int64_t bytes = shape.num_elements() * int64_t(size_of(dtype));
  int64_t parts = std::max<int64_t>(1, (bytes + max_part_bytes - 1) / max_part_bytes);
  if (max_parts > 0) parts = std::min<int64_t>(parts, max_parts);
  return int(std::min<int64_t>(parts, std::max<int64_t>(1, shape[0])));
}

}  // namespace troupe
