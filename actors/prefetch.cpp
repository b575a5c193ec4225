#include "actors/prefetch.hpp"

#include "ops/basic.hpp"

namespace troupe {

QueueFeed queue_feed(const Scope& scope, const ops::Queue& queue) {
  const QueueSpec& spec = queue.spec();
  Scope s = scope.sub("feed_" + spec.name);
  QueueFeed feed;
  for (std::size_t i = 0; i < spec.types.size(); ++i)
    feed.placeholders.push_back(ops::placeholder(s, spec.types[i],
                                                 i < spec.shapes.size() ? spec.shapes[i] : PartialShape::unknown()));
  feed.enqueue = queue.enqueue(s, feed.placeholders);
  feed.close = queue.close(s);
  feed.close_cancel = queue.close(s, true);
  return feed;
}

Prefetcher::Prefetcher(Session& session, QueueFeed feed, data::Pipeline pipeline)
    : session_(&session), feed_(std::move(feed)) {
  thread_ = std::thread([this, pipeline = std::move(pipeline)]() mutable { run(std::move(pipeline)); });
}

Prefetcher::~Prefetcher() {
  if (!thread_.joinable()) return;
  stop_ = true;
  try {
    session_->run({}, {}, {feed_.close_cancel});
  } catch (...) {
  }
  thread_.join();
}

void Prefetcher::run(data::Pipeline pipeline) {
  try {
    auto it = pipeline.begin();
    while (!stop_) {
      auto element = it->next();
      if (!element) break;
      if (element->size() != feed_.placeholders.size())
        fail(ErrorCode::invalid_argument, "the pipeline yields {} component(s), the queue takes {}", element->size(),
             feed_.placeholders.size());
      FeedList feeds;
      for (std::size_t i = 0; i < element->size(); ++i) feeds.push_back({feed_.placeholders[i], (*element)[i]});
      session_->run(feeds, {}, {feed_.enqueue});
      ++elements_;
    }
  } catch (...) {
    if (!stop_) error_ = std::current_exception();
  }
  try {
    session_->run({}, {}, {feed_.close});  // the end of the input, or of a failed pipeline
  } catch (...) {
  }
}

void Prefetcher::join() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace troupe
