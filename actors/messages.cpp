#include "actors/messages.hpp"

namespace troupe {

uint64_t child_frame_id(const Tag& parent, uint64_t name_hash) {
  // splitmix64's finaliser over the parent's frame, iteration and the loop's name.
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t id = mix(mix(parent.frame ^ 0x9e3779b97f4a7c15ULL) + uint64_t(parent.iteration)) ^ mix(name_hash);
  return id == 0 ? 1 : id;  // 0 is the root frame
}

Tag child_tag(const Tag& parent, const std::string& name, uint64_t name_hash) {
  return Tag{parent.step, child_frame_id(parent, name_hash), 0, std::make_shared<const Frame>(Frame{name, parent})};
}

const Tag& parent_tag(const Tag& tag) {
  if (!tag.info) fail(ErrorCode::internal, "Exit in the root frame: it has no parent frame");
  return tag.info->parent;
}

std::string describe_frame(const Tag& tag) {
  std::string out;
  for (const Tag* t = &tag; t->info; t = &t->info->parent) {
    out += out.empty() ? "in frame '" : " (in frame '";
    out += t->info->name + "' iteration " + std::to_string(t->iteration);
  }
  for (const Tag* t = tag.info ? &tag.info->parent : nullptr; t && t->info; t = &t->info->parent) out += ")";
  return out;
}

}  // namespace troupe
