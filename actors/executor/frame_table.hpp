#pragma once
// The frame state of one executable's steps (TensorFlow's propagator_state.h): which loop
// frames each step has entered, from where, and which worker runs a spread loop's iteration.
// Enter, Exit, NextIteration, the stack nodes and error messages read and write it.
// Internal to actors/.
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/messages.hpp"
#include "core/thread_annotations.hpp"

namespace troupe {

// The frame id of loop `name_hash` (fingerprint64 of the frame's name) entered from `parent`: a
// pure function of its inputs, the same in every process and build.
uint64_t child_frame_id(const Tag& parent, uint64_t name_hash);

// The frames the steps of one executable have entered: per (step, frame id) the loop's name and
// the tag it was entered from. Enter writes it; Exit, the stacks of a loop's gradient and error
// messages read it. A frame is forgotten when the last of its loop's Exits has left it; the
// frames of a failed step when the step ends (a late message of it then finds nothing and is
// dropped, instead of following a dangling pointer). Thread-safe.
class FrameTable {
 public:
  // Iteration 0 of the frame `name` entered from `parent`, remembered until all `enters` Enters
  // of the loop have entered it and all `exits` Exits have left it. Both counts matter: a dead
  // loop's Exits need no value, so they may all leave before a late Enter arrives, which must
  // find the frame and not make it anew (it would never be left). A failed step's (drop_step)
  // is not made: its Exits will not leave it.
  Tag enter(const Tag& parent, const std::string& name, uint64_t name_hash, int exits, int enters);
  // One of the frame's Exits has left it.
  void exited(const Tag& tag);
  // The tag the frame of `tag` was entered from; nullopt for the root frame or an ended step.
  std::optional<Tag> parent(const Tag& tag) const;
  // The iterations of every frame of `tag`, outermost first (empty in the root frame);
  // nullopt for an ended step.
  std::optional<std::vector<int64_t>> iterations(const Tag& tag) const;
  // "" in the root frame; else "in frame 'f' iteration k (in frame 'g' iteration j)".
  std::string describe(const Tag& tag) const;
  // The worker (of `workers`) that iteration tag.iteration of its frame runs on, for a loop that
  // spreads its iterations over the workers (actors/executor/node.hpp, NodeActor::spread) and
  // starts an iteration only once every iteration `window` or more before it has finished
  // (parallel_iterations): chosen at the first ask for the iteration, the worker with the
  // fewest of the frame's iterations not yet finished (iteration_finished), ties going to
  // iteration mod workers; the same answer after, for as long as the iteration runs. So a
  // worker that is slower, or busier with other work, is given fewer iterations, instead of
  // every other one while its iterations fill the window and the other worker waits.
  // Iteration mod workers for a frame not known (ended, or not entered in this partition), and
  // for every iteration of a loop with a window above 4096.
  int iteration_worker(const Tag& tag, int window, int workers);
  // Iteration tag.iteration of the frame has finished (its loop's iteration gate): its worker
  // counts it no more. Said more than once (every NextIteration of the loop hears the gate),
  // it counts once.
  void iteration_finished(const Tag& tag);
  // Forgets the frames of a failed step, and remembers (for the last 1024 such steps) that it
  // ended: a lookup that finds nothing for it is then expected, not an error.
  void drop_step(uint64_t step);
  bool dropped(uint64_t step) const;
  std::size_t size() const;  // frames held, over all steps

 private:
  // Where a spread loop's iteration runs (iteration_worker): kept for the last `window`
  // iterations, iteration k at k mod window.
  struct Placed {
    int64_t iteration = -1;
    int16_t worker = 0;
    bool running = false;  // counted in Record::running until the iteration has finished
  };
  struct Record {
    std::string name;
    Tag parent;
    int exits_left;
    int enters_left;
    std::vector<Placed> placed;  // made at the first iteration_worker()
    std::vector<int> running;    // per worker: its iterations placed and not finished
  };
  // Lock order: a leaf. Node actors call in from any worker thread holding nothing of theirs
  // that another caller could want (a node's own mailbox lock at most); nothing is locked
  // under it and no message is sent while it is held.
  mutable std::mutex mutex_;
  std::map<std::pair<uint64_t, uint64_t>, Record> frames_ TROUPE_GUARDED_BY(mutex_);
  std::set<uint64_t> dropped_ TROUPE_GUARDED_BY(mutex_);
  std::deque<uint64_t> dropped_order_ TROUPE_GUARDED_BY(mutex_);
};

}  // namespace troupe
