#include "actors/cluster/cluster_messages.hpp"

#include <cstring>

namespace troupe {

WireTensor to_wire(const Tensor& tensor) {
  WireTensor w;
  w.dtype = int32_t(tensor.dtype());
  w.dims = tensor.shape().dims();
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  if (tensor.byte_size() > 0) w.bytes.assign(data, data + tensor.byte_size());
  return w;
}

Tensor from_wire(const WireTensor& w, const std::string& what) {
  if (w.dtype <= 0 || w.dtype > int32_t(DType::boolean)) fail(ErrorCode::data_loss, "{}: unknown dtype {}", what, w.dtype);
  if (w.dims.size() > std::size_t(Shape::kMaxRank)) fail(ErrorCode::data_loss, "{}: {} dimensions", what, w.dims.size());
  for (int64_t d : w.dims)
    if (d < 0) fail(ErrorCode::data_loss, "{}: a negative dimension {}", what, d);
  Tensor t(DType(w.dtype), Shape(w.dims));
  if (t.byte_size() != w.bytes.size())
    fail(ErrorCode::data_loss, "{}: {} bytes for a {} tensor of {} bytes", what, w.bytes.size(), t.describe(), t.byte_size());
  if (!w.bytes.empty()) std::memcpy(t.raw_data(), w.bytes.data(), w.bytes.size());
  return t;
}

void add_cluster_types(caf::actor_system_config& config) {
  add_transfer_types(config);
  config.add_message_type<Tag>("troupe.Tag");
  config.add_message_type<WireTensor>("troupe.WireTensor");
  config.add_message_type<std::vector<WireTensor>>("troupe.WireTensors");
  config.add_message_type<WirePartition>("troupe.WirePartition");
  config.add_message_type<std::vector<WirePartition>>("troupe.WirePartitions");
  config.add_message_type<TaskPeer>("troupe.TaskPeer");
  config.add_message_type<std::vector<TaskPeer>>("troupe.TaskPeers");
  config.add_message_type<RegisterGraph>("troupe.RegisterGraph");
  config.add_message_type<RunGraphReply>("troupe.RunGraphReply");
  config.add_message_type<RemoteValue>("troupe.RemoteValue");
  config.add_message_type<std::vector<uint64_t>>("troupe.uint64s");
}

}  // namespace troupe
