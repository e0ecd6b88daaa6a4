// The bodies of kiln's C++ helpers (prelude/kiln.hpp), compiled once by install.sh into
// prelude/libkiln.a, which the test command links.
#include "kiln.hpp"

#include <sys/stat.h>

namespace kiln {

std::string dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string seconds(std::chrono::steady_clock::duration elapsed) {
    char text[32];
    std::snprintf(text, sizeof text, "%.7f", std::chrono::duration<double>(elapsed).count());
    return text;
}

namespace {

void flush_stdout() {
    std::cout.flush();
    std::fflush(stdout);
}

}  // namespace

Capture::Capture() {
    flush_stdout();
    file_ = memfd_create("kiln-output", MFD_CLOEXEC);
    saved_ = file_ < 0 ? -1 : dup(STDOUT_FILENO);
    if (saved_ < 0 || dup2(file_, STDOUT_FILENO) < 0) release();
}

Capture::~Capture() { take(); }

std::string Capture::take() {
    std::string text;
    if (saved_ < 0) return text;
    flush_stdout();
    dup2(saved_, STDOUT_FILENO);
    off_t size = lseek(file_, 0, SEEK_END);
    if (size > 0) {
        text.resize(static_cast<size_t>(size));
        ssize_t got = pread(file_, text.data(), text.size(), 0);
        text.resize(got > 0 ? static_cast<size_t>(got) : 0);
    }
    release();
    return text;
}

void Capture::release() {
    if (saved_ >= 0) close(saved_);
    if (file_ >= 0) close(file_);
    saved_ = file_ = -1;
}

Report::Report() : items_(json::array()) {}

void Report::add(const std::string& type, json value, std::chrono::steady_clock::duration elapsed, std::string output) {
    json item;
    item["type"] = type;
    item["value"] = std::move(value);
    item["time"] = seconds(elapsed);
    item["output"] = std::move(output);
    items_.push_back(std::move(item));
}

void Report::print(std::ostream& out) const { out << dump(items_) << '\n' << std::flush; }

HoldLoadOutput::HoldLoadOutput() {
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // printf, puts, std::cout synced with stdio
    std::cout.setf(std::ios::unitbuf);         // std::cout after sync_with_stdio(false) too
}

namespace {

// Constructed after every global of the checker's translation unit (and so of the solution it
// includes): the linker lays out the constructors of one priority in link order, and libkiln.a
// comes after check/checker.cpp. From here on stdout buffers as glibc would have it (a pipe:
// fully, by blocks of its st_blksize up to BUFSIZ; a terminal: by lines).
struct LoadEnded {
    LoadEnded() {
        std::cout.unsetf(std::ios::unitbuf);
        static char buffer[BUFSIZ];
        struct stat status {};
        size_t size = sizeof buffer;
        bool terminal = isatty(STDOUT_FILENO);
        if (!terminal && fstat(STDOUT_FILENO, &status) == 0 && status.st_blksize > 0 && static_cast<size_t>(status.st_blksize) < size)
            size = static_cast<size_t>(status.st_blksize);
        std::setvbuf(stdout, buffer, terminal ? _IOLBF : _IOFBF, size);
    }
} load_ended;

}  // namespace

json asserts(const std::string& path) {
    std::ifstream in(path);
    if (!in) return nullptr;
    json all = json::parse(in, nullptr, false);
    return all.is_discarded() ? json(nullptr) : all;
}

json arguments(const std::string& path) {
    json all = asserts(path);
    if (all.is_object() && all.contains("arguments") && all["arguments"].is_array()) return all["arguments"];
    return json::array();
}

}  // namespace kiln

#ifdef KILN_JSON_LITERALS_OUT_OF_LINE
// The bodies prelude/nlohmann-json.hpp leaves out, as nlohmann's header has them.
NLOHMANN_JSON_NAMESPACE_BEGIN
inline namespace literals {
inline namespace json_literals {

nlohmann::json operator"" _json(const char* s, std::size_t n) { return nlohmann::json::parse(s, s + n); }

nlohmann::json::json_pointer operator"" _json_pointer(const char* s, std::size_t n) {
    return nlohmann::json::json_pointer(std::string(s, n));
}

}  // namespace json_literals
}  // namespace literals
NLOHMANN_JSON_NAMESPACE_END
#endif

#ifdef KILN_JSON_INSTANCES
// nlohmann::json's and nlohmann::ordered_json's members (not their member templates), which
// prelude/nlohmann-json.hpp declares instantiated here: a checker calls these instead of
// instantiating and compiling its own copies.
template class nlohmann::basic_json<>;
template class nlohmann::basic_json<nlohmann::ordered_map>;
#endif
