#pragma once
// One loop invocation's invariants, served to every iteration of it: the state a loop invariant
// (loop_invariant_node.hpp, an invariant whose loop's Merge is on another device) and a loop's
// first Merge (loop_merge_node.hpp, the invariants of its partition) keep per frame.
// Each value comes once, in the frame around the loop; each iteration starts once. An iteration
// that starts after a value has come is given it at once; one that started before gets it as the
// value comes, in the order the iterations started. The state is over once every value has come,
// every producer of the loop's end (its LoopCond, false or dead) has said which iteration is the
// last, and that iteration has started.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/messages.hpp"

namespace troupe {

struct InvariantServer {
  struct Invariant {
    bool arrived = false;
    bool dead = false;
    Tensor value;
  };
  std::vector<Invariant> values;  // per invariant served
  int arrived = 0;                // of them
  int64_t started = 0;            // iterations started so far
  int64_t end = -1;               // the loop's last iteration, once known
  int ends = 0;                   // producers of the loop's end that have said so
  std::vector<Tag> early;         // iterations started before every value had come

  // Iteration `tag` has started: serve(i, values[i], tag) for every value come so far.
  template <class Serve>
  void iteration_started(const Tag& tag, Serve&& serve) {
    ++started;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i].arrived) serve(i, values[i], tag);
    if (arrived < int(values.size())) early.push_back(tag);
  }
  // Invariant `i`'s value has come: serve(i, values[i], t) for every iteration started before.
  template <class Serve>
  void value_arrived(std::size_t i, Value& value, Serve&& serve) {
    Invariant& inv = values.at(i);
    inv.arrived = true;
    inv.dead = value.dead;
    inv.value = std::move(value.tensor);
    ++arrived;
    for (const Tag& t : early) serve(i, inv, t);
    if (arrived == int(values.size())) std::vector<Tag>().swap(early);
  }
  // One producer of the loop's end says `iteration` is the last.
  void last_iteration(int64_t iteration) {
    end = iteration;
    ++ends;
  }
  // Every value served to every iteration: the state may go. `end_producers`: how many say the end.
  bool over(int end_producers) const {
    return arrived == int(values.size()) && ends >= end_producers && started > end;
  }
  // The iterations given invariant `i` so far.
  int64_t served(std::size_t i) const { return values[i].arrived ? started : 0; }
};

}  // namespace troupe
