#pragma once
// The rendezvous of an executable (TensorFlow's Rendezvous): where each of its _Sends delivers,
// and what else hears of its steps. The executor resolves every _Send through one and knows
// nothing of the processes beyond it. Two implementations:
//   LocalRendezvous   (here) every _Recv is among the executable's own partitions: each _Send
//                     is wired straight to the _Recv actor of its rendezvous key;
//   MemberRendezvous  (actors/cluster/member_rendezvous.hpp) one process's share of steps run
//                     by several: a _Recv in another process is reached through the outbox to
//                     that process, and values from there come in through this process's inbox.
// A rendezvous is made before its executable, read-only once the executable is built (bind()
// is its last write), and shared by the executable's step actor.
#include <map>
#include <optional>
#include <string>

#include "actors/executor/target.hpp"
#include "core/error.hpp"
#include "graph/graph.hpp"

namespace troupe {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Where the _Send of rendezvous key `key` (described by `where` in errors) delivers: `own`,
  // this executable's _Recv of that key, if it has one; else what beyond() says; else it is an
  // internal error.
  Target resolve(const std::string& key, const Target* own, const std::string& where) const;
  // Whether the step's answer here waits for `send` to have fired, as for a target: a share of
  // a step is answered only once its values for the other shares are out.
  virtual bool awaits(const Node& send) const = 0;
  // Whether the executable runs a share of steps that others run too: values from elsewhere may
  // start a step here before this share is run (the step actor keeps what they report until
  // then), and a node may fail after this share was answered (abort()).
  virtual bool shared() const = 0;
  // The executable's _Recv actors by rendezvous key, once spawned (the last write).
  virtual void bind(std::map<std::string, caf::actor> recvs) = 0;
  // A node failed in step `tag.step` after this share of it was answered: the other shares
  // still run it, and must hear of the failure.
  virtual void abort(const Tag& tag, ErrorCode code, std::string message, std::string device) const = 0;

 private:
  // Where the _Send of `key` delivers when no _Recv of the executable has that key; nothing: nowhere.
  virtual std::optional<Target> beyond(const std::string& key) const = 0;
};

// Every _Recv in the executable itself: a _Send without one is an internal error, and a step is
// answered only once it ends, so there is nothing to tell anyone else.
class LocalRendezvous final : public Rendezvous {
 public:
  bool awaits(const Node&) const override { return false; }
  bool shared() const override { return false; }
  void bind(std::map<std::string, caf::actor>) override {}
  void abort(const Tag&, ErrorCode, std::string, std::string) const override {}

 private:
  std::optional<Target> beyond(const std::string&) const override { return std::nullopt; }
};

}  // namespace troupe
