// Internal: the cache of codelets compiled at run time — its private folder,
// the SHA-256 key over everything that goes into a compile, and safe writes.
#pragma once
#include <string>

namespace poplar {
namespace detail {

// Lowercase hex SHA-256 of `data`.
std::string sha256Hex(const std::string &data);

// The cache folder ($POPSNN_CACHE_DIR, else $XDG_CACHE_HOME/popsnn, else
// ~/.cache/popsnn, else $TMPDIR or /tmp + /popsnn-cache-<uid>), created 0700.
// Throws graph_program_compilation_error if it is not a folder of this user
// that only this user can write to.
std::string codeletCacheDir();

// True if `path` is a regular file (not a symlink) owned by this user and not
// writable by group or others; otherwise false with the reason in `why`.
bool isPrivateFile(const std::string &path, std::string &why);

// Writes `text` to `path` (mode 0600) through a temporary file in the same
// folder and rename(), so readers never see a half-written file.
void writeFileAtomically(const std::string &path, const std::string &text);

// The whole of the file at `path` into `out`; false if it cannot be read.
bool readFile(const std::string &path, std::string &out);

// Makes `path` and any missing parents (mode 0700).
void makePrivateDirs(const std::string &path);

// Path and content of every project file the codelet source includes,
// transitively: #include "..." and <...> looked up in the including file's
// folder, the source's folder and the -I/-iquote/-isystem folders of `flags`.
// Headers found nowhere there are the system's (covered by the compiler's
// identity) or the runtime's own (covered by its version).
std::string includedFilesFingerprint(const std::string &sourcePath, const std::string &source,
                                     const std::string &flags);

} // namespace detail
} // namespace poplar
