#include "actors/cluster/cluster_messages.hpp"

#include <algorithm>
#include <cstring>

#include "actors/cluster/cluster_checkpoint.hpp"

namespace troupe {

WireTensor to_wire(const Tensor& tensor) {
  return chunk_of(tensor, 0, 0, std::max<std::size_t>(1, tensor.byte_size()));
}

Tensor from_wire(WireTensor& w, const std::string& what) {
  if (w.encoding != TensorChunk::raw || w.offset != 0 || w.bytes.size() != w.total)
    fail(ErrorCode::data_loss, "{}: not one whole raw tensor ({} of {} bytes at {})", what, w.bytes.size(), w.total, w.offset);
  if (auto landed = w.bytes.take_landed()) return std::move(*landed);  // read straight into it
  auto whole = whole_tensor_for(w, w.bytes.size());
  if (!whole)
    fail(ErrorCode::data_loss, "{}: dtype {}, dims of rank {} and {} bytes do not make a tensor", what, w.dtype,
         w.dims.size(), w.bytes.size());
  if (!w.bytes.empty()) std::memcpy(whole->raw_data(), w.bytes.data(), w.bytes.size());
  return std::move(*whole);
}

void add_cluster_types(caf::actor_system_config& config) {
  add_transfer_types(config);
  config.add_message_type<Tag>("troupe.Tag");
  config.add_message_type<std::vector<TensorChunk>>("troupe.TensorChunks");
  config.add_message_type<WirePartition>("troupe.WirePartition");
  config.add_message_type<std::vector<WirePartition>>("troupe.WirePartitions");
  config.add_message_type<TaskPeer>("troupe.TaskPeer");
  config.add_message_type<std::vector<TaskPeer>>("troupe.TaskPeers");
  config.add_message_type<RegisterGraph>("troupe.RegisterGraph");
  config.add_message_type<RunGraphReply>("troupe.RunGraphReply");
  config.add_message_type<RemoteValue>("troupe.RemoteValue");
  config.add_message_type<std::vector<uint64_t>>("troupe.uint64s");
  config.add_message_type<WaitReport>("troupe.WaitReport");
  config.add_message_type<std::vector<WaitReport>>("troupe.WaitReports");
  config.add_message_type<StepStatus>("troupe.StepStatus");
  config.add_message_type<std::vector<StepStatus>>("troupe.StepStatuses");
  add_checkpoint_types(config);
}

}  // namespace troupe
