#pragma once
// Writing a whole file so that a reader never sees half of it and a crash loses nothing said to
// be written: a temporary file beside it (PATH.tmp), written, fsynced, renamed over PATH, and
// the directory fsynced. Errors throw troupe::Error naming the file and errno's text.
#include <string>
#include <string_view>

#include <sys/types.h>

namespace troupe {

void write_file_durably(const std::string& path, std::string_view text, mode_t mode = 0644);

}  // namespace troupe
