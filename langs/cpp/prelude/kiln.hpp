// kiln's C++ prelude: force-included (g++ -include) before check/checker.cpp and precompiled
// (prelude/kiln.hpp.gch, built by install.sh with the Makefile's exact flags), so a request
// never pays for parsing the standard library or the JSON library. The helpers' bodies that use
// the JSON library are compiled once too, into prelude/libkiln.a (prelude/kiln.cpp), which the
// test command links: a checker that uses them does not instantiate JSON parsing and printing.
//
// It brings in the whole standard library (<bits/stdc++.h>), nlohmann::json (Debian's
// nlohmann-json3-dev), the `nlohmann::fifo_map` that Codebattle's checkers use, and the helpers
// below, all in namespace `kiln`: nothing is added to the global namespace, so a checker that
// declares its own `json`, `fifo_map` or `using namespace std;` compiles as it would without it.
//
//   #include "solution.cpp"
//   int main() {
//       kiln::Report report;
//       for (const auto& args : kiln::arguments())            // check/asserts.json's "arguments"
//           report.call([&] { return solution(args[0].get<int>(), args[1].get<int>()); });
//       report.print();                                        // one JSON array on stdout
//   }
#ifndef KILN_PRELUDE_HPP
#define KILN_PRELUDE_HPP

#include <bits/stdc++.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nlohmann-json.hpp"  // <nlohmann/json.hpp>: see the end of this file

#include "../fifo_map.hpp"

namespace kiln {

// Objects keep their keys in insertion order, as in the protocol's examples.
using json = nlohmann::ordered_json;

// Text for JSON: invalid UTF-8 from a solution is replaced, never an exception.
std::string dump(const json& value);

// Seconds with 7 decimals, as the protocol's "time" ("0.0000123").
std::string seconds(std::chrono::steady_clock::duration elapsed);

// Everything written to fd 1 while it lives (std::cout, printf, puts, write(1, ...)) goes to a
// memory file instead; take() restores fd 1 and returns the text.
class Capture {
public:
    Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    ~Capture();
    std::string take();

private:
    void release();
    int file_ = -1;
    int saved_ = -1;
};

// The protocol: one item per call, printed as one JSON array.
class Report {
public:
    // Calls fn() with its output captured and timed. Its value becomes a "result" item; an
    // exception an "error" item (its what()), and the next calls still run.
    template <class Fn>
    void call(Fn&& fn) {
        Capture capture;
        auto started = std::chrono::steady_clock::now();
        try {
            if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
                fn();
                auto elapsed = std::chrono::steady_clock::now() - started;
                add("result", nullptr, elapsed, capture.take());
            } else {
                json value = fn();
                auto elapsed = std::chrono::steady_clock::now() - started;
                add("result", std::move(value), elapsed, capture.take());
            }
        } catch (const std::exception& error) {
            auto elapsed = std::chrono::steady_clock::now() - started;
            add("error", error.what(), elapsed, capture.take());
        } catch (...) {
            auto elapsed = std::chrono::steady_clock::now() - started;
            add("error", "unknown exception", elapsed, capture.take());
        }
    }
    Report();  // out of line, with items_'s value: see the end of this file
    void add(const std::string& type, json value, std::chrono::steady_clock::duration elapsed, std::string output);

    const json& items() const { return items_; }

    // The array on one line, then a flush.
    void print(std::ostream& out = std::cout) const;

private:
    json items_;
};

// check/asserts.json as JSON (null when absent or invalid).
json asserts(const std::string& path = "check/asserts.json");

// The argument lists of check/asserts.json ({"arguments": [[...], ...]}), or an empty array.
json arguments(const std::string& path = "check/asserts.json");

// What the solution prints while it loads (its globals' initialisers, before main) is written at
// once, so that a load ended abruptly (_exit, a kill, the timeout, an OOM) loses none of it: a
// pipe's stdout is otherwise fully buffered, and only exit() flushes. This object is constructed
// after <bits/stdc++.h>'s std::cout and before anything of the checker's translation unit;
// libkiln.a's last constructor gives stdout its buffer back (kiln.cpp, LoadEnded).
struct HoldLoadOutput {
    HoldLoadOutput();
};
[[gnu::used]] static HoldLoadOutput hold_load_output;

}  // namespace kiln

#endif  // KILN_PRELUDE_HPP

// About "nlohmann-json.hpp" (here, at the end: every line above keeps its number, which g++'s
// messages about a checker quote):
// Debian's <nlohmann/json.hpp>, as `make prelude` copied it (prelude/json-literals.awk): the same
// header under its own name and line numbers (#line), a system header as before, but for its two
// string literal operators, `"..."_json` and `"..."_json_pointer`, declared here and defined in
// libkiln.a (kiln.cpp). Defined inline, their bodies made g++ instantiate the whole JSON parser
// at the end of every translation unit (~0.45 s of CPU, a third of an a+b compile), the PCH
// notwithstanding: g++ writes a PCH before it instantiates what the header asked for. The
// library's include guard keeps <nlohmann/json.hpp> and "../json.hpp" from being read again.
//
// About `Report()` (declared after `call`, so that no line of `call` moves): defined in kiln.cpp
// with items_'s value. An initializer in the class (`json items_ = json::array();`) made g++
// instantiate much of the JSON library at the end of every translation unit, as the literal
// operators did (~0.25 s of CPU for an empty file with the prelude: 0.55 -> 0.3 s).
