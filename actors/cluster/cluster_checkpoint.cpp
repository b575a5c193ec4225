#include "actors/cluster/cluster_checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "actors/cluster/member_context.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/timeouts.hpp"

namespace troupe {

std::string slot_entry(const std::string& variable, const OptimizerSpec& spec, int k) {
  return fmt::format("{}/{}/{}", variable, spec.name(), spec.slot_name(k));
}
std::string step_entry(const std::string& variable, const OptimizerSpec& spec) {
  return fmt::format("{}/{}/step", variable, spec.name());
}

namespace {

int64_t step_value(const Tensor& t, const std::string& name) {
  if (t.dtype() == DType::int64 && t.num_elements() == 1) return t.data<int64_t>()[0];
  if (t.dtype() == DType::int32 && t.num_elements() == 1) return t.data<int32_t>()[0];
  fail(ErrorCode::invalid_argument, "Saver: the global step variable '{}' holds {}; it must be an integer scalar", name,
       t.describe());
}

}  // namespace

std::vector<checkpoint::SavedTensor> tensors_to_save(const ShardContents& contents, const VariableLayouts& layouts,
                                                     bool only_listed, const std::string& step_variable,
                                                     std::optional<int64_t>& step) {
  std::vector<checkpoint::SavedTensor> out;
  auto layout_of = [&](const std::string& name) -> const VariableLayout* {
    auto it = layouts.find(name);
    return it == layouts.end() ? nullptr : &it->second;
  };
  for (auto& [name, value] : contents.variables) {
    const VariableLayout* v = layout_of(name);
    if (!v && only_listed) continue;
    if (!step_variable.empty() && name == step_variable) step = step_value(value, name);
    if (v && v->partitioned) out.push_back({v->saved_name, value, v->full_shape, v->row_begin});
    else out.push_back({name, value, value.shape(), 0});
  }
  for (auto& o : contents.optimizers) {
    const VariableLayout* v = layout_of(o.variable);
    if (!v && only_listed) continue;
    const std::string& base = v ? v->saved_name : o.variable;
    const bool split = v && v->partitioned;
    for (int k = 0; k < int(o.slots.size()); ++k) {
      const Tensor& slot = o.slots[std::size_t(k)];
      out.push_back(
          {slot_entry(base, o.spec, k), slot, split ? v->full_shape : slot.shape(), split ? v->row_begin : 0});
    }
    // A partitioned variable's parts are updated together: their count is saved once.
    if (!split || v->row_begin == 0)
      out.push_back({step_entry(base, o.spec), Tensor::scalar<int64_t>(o.step), Shape{}, 0});
  }
  return out;
}

WireOptimizer to_wire(const std::string& variable, const OptimizerSpec& s) {
  return {variable, int32_t(s.kind), s.momentum, s.initial_accumulator, s.rho, s.beta1, s.beta2, s.epsilon, s.nesterov};
}

OptimizerSpec spec_of(const WireOptimizer& w) {
  OptimizerSpec s;
  s.kind = OptimizerKind(w.kind);
  s.momentum = w.momentum;
  s.nesterov = w.nesterov;
  s.initial_accumulator = w.initial_accumulator;
  s.rho = w.rho;
  s.beta1 = w.beta1;
  s.beta2 = w.beta2;
  s.epsilon = w.epsilon;
  return s;
}

void add_checkpoint_types(caf::actor_system_config& config) {
  config.add_message_type<WireOptimizer>("troupe.WireOptimizer");
  config.add_message_type<std::vector<WireOptimizer>>("troupe.WireOptimizers");
  config.add_message_type<WireLayout>("troupe.WireLayout");
  config.add_message_type<std::vector<WireLayout>>("troupe.WireLayouts");
  config.add_message_type<SaveShards>("troupe.SaveShards");
  config.add_message_type<WireIndexEntry>("troupe.WireIndexEntry");
  config.add_message_type<std::vector<WireIndexEntry>>("troupe.WireIndexEntries");
  config.add_message_type<SaveShardsReply>("troupe.SaveShardsReply");
  config.add_message_type<WireRequest>("troupe.WireRequest");
  config.add_message_type<std::vector<WireRequest>>("troupe.WireRequests");
  config.add_message_type<RestoreShards>("troupe.RestoreShards");
}

namespace {

// A file name made of a task's name: "ps:0" -> "ps-0".
std::string file_safe(std::string task) {
  std::replace(task.begin(), task.end(), ':', '-');
  return task;
}

}  // namespace

SaveShardsReply save_task_shards(MemberContext& context, const SaveShards& request) {
  const std::string task = context.task.to_string();
  SaveShardsReply reply;
  try {
    VariableLayouts layouts;
    for (auto& v : request.variables)
      layouts.emplace(v.name, VariableLayout{v.saved_name, v.partitioned, Shape(v.full_dims), v.row_begin});
    std::vector<OptimizerState> wanted;
    for (auto& o : request.optimizers) wanted.push_back({o.variable, spec_of(o), {}, 0});
    const ParamShards& shards = *context.shards;
    // Every shard takes its snapshot between two of its own messages, all asked at once.
    caf::scoped_actor self{context.runtime->system()};
    std::vector<ShardContents> contents(std::size_t(shards.size()));
    using Handle = decltype(self->request(ShardActor{}, timeouts::shard_checkpoint(), snapshot_atom::value, wanted));
    std::vector<Handle> asked;
    for (int i = 0; i < shards.size(); ++i)
      asked.push_back(self->request(shards.at(i), timeouts::shard_checkpoint(), snapshot_atom::value, wanted));
    for (std::size_t i = 0; i < asked.size(); ++i)
      asked[i].receive([&](ShardContents& c) { contents[i] = std::move(c); },
                       [&](caf::error& e) {
                         fail(ErrorCode::unavailable, "parameter shard {} did not answer the snapshot: {}", i,
                              context.runtime->system().render(e));
                       });
    std::optional<int64_t> step;
    for (std::size_t i = 0; i < contents.size(); ++i) {
      for (auto& [name, value] : contents[i].variables)
        if (layouts.count(name)) reply.held.push_back(name);
      std::vector<checkpoint::SavedTensor> tensors = tensors_to_save(contents[i], layouts, true, request.step_variable,
                                                                     step);
      contents[i] = {};  // lets the shard update in place once written
      if (tensors.empty()) continue;
      const std::string file = fmt::format("{}-shard-{:05d}-of-{:05d}.data", file_safe(task), i, contents.size());
      for (auto& e : checkpoint::write_data_file(request.temp_dir, file, std::move(tensors)))
        reply.entries.push_back(
            {e.name, e.file, int32_t(e.dtype), e.full_shape.dims(), e.row_begin, e.rows, e.offset, e.length, e.crc32c});
      reply.files.push_back(file);
    }
    if (step) reply.has_step = true, reply.step = *step;
  } catch (const Error& e) {
    reply = {};
    reply.code = int32_t(e.code());
    reply.message = fmt::format("task {}: {}", task, e.what());
  } catch (const std::exception& e) {
    reply = {};
    reply.code = int32_t(ErrorCode::internal);
    reply.message = fmt::format("task {}: {}", task, e.what());
  }
  return reply;
}

std::pair<int32_t, std::string> restore_task_shards(MemberContext& context, const RestoreShards& request) {
  const std::string task = context.task.to_string();
  try {
    std::vector<checkpoint::Request> requests;
    for (auto& r : request.requests)
      requests.push_back({r.name, DType(r.dtype), Shape(r.full_dims), r.row_begin, r.rows});
    // Everything is read and checked before anything is assigned.
    std::vector<Tensor> values = checkpoint::read(request.path, requests);
    if (!request.assign) return {int32_t(ErrorCode::ok), {}};
    const ParamShards& shards = *context.shards;
    std::vector<ShardContents> contents(std::size_t(shards.size()));
    std::size_t next = 0;
    for (auto& name : request.variables)
      contents[std::size_t(shards.index_of(name))].variables.emplace_back(name, std::move(values[next++]));
    for (auto& o : request.optimizers) {
      OptimizerState state{o.variable, spec_of(o), {}, 0};
      for (int k = 0; k < state.spec.num_slots(); ++k) state.slots.push_back(std::move(values[next++]));
      state.step = values[next++].scalar_value<int64_t>();
      contents[std::size_t(shards.index_of(o.variable))].optimizers.push_back(std::move(state));
    }
    caf::scoped_actor self{context.runtime->system()};
    for (int i = 0; i < shards.size(); ++i) {
      if (contents[std::size_t(i)].variables.empty() && contents[std::size_t(i)].optimizers.empty()) continue;
      self->request(shards.at(i), timeouts::shard_checkpoint(), restore_atom::value, std::move(contents[std::size_t(i)]))
          .receive([](ShardReply&) {},
                   [&](caf::error& e) {
                     fail(ErrorCode::unavailable, "parameter shard {} did not answer the restore: {}", i,
                          context.runtime->system().render(e));
                   });
    }
    return {int32_t(ErrorCode::ok), {}};
  } catch (const Error& e) {
    return {int32_t(e.code()), fmt::format("task {}: {}", task, e.what())};
  } catch (const std::exception& e) {
    return {int32_t(ErrorCode::internal), fmt::format("task {}: {}", task, e.what())};
  }
}

std::pair<int32_t, std::string> check_task_dir(MemberContext& context, const std::string& dir,
                                               const std::string& probe, const std::string& chief) {
  try {
    checkpoint::check_writable(dir);
    std::error_code ec;
    if (!probe.empty() && !std::filesystem::exists(std::filesystem::path(dir) / probe, ec))
      fail(ErrorCode::failed_precondition,
           "the checkpoint directory {} here is not the one {} (the chief) writes into: the file {} it made there is "
           "not in this task's {}. Each task writes the variables it holds into the checkpoint itself, so on several "
           "hosts the directory must be on a file system every task shares (NFS, a cluster file system), mounted at "
           "the same path (docs/cluster.md, \"Training across hosts\")",
           dir, chief, probe, dir);
    return {int32_t(ErrorCode::ok), {}};
  } catch (const Error& e) {
    return {int32_t(e.code()), fmt::format("task {}: {}", context.task.to_string(), e.what())};
  }
}

}  // namespace troupe
