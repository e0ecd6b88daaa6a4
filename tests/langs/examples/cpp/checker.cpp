// An example checker for kiln's cpp workspace. kiln's prelude (force-included, precompiled) gives
// the standard library, nlohmann::json and the kiln:: helpers, so this file needs no #include but
// the solution's. For each argument list of check/asserts.json ({"arguments": [[a, b], ...]}) it
// calls solution(a, b) and prints the protocol: one JSON array with one item per call,
// {"type":"result","value":...,"time":"0.0000123","output":"<what the call printed>"}, or an
// "error" item when the call throws.
#include "solution.cpp"

int main() {
    kiln::Report report;
    for (const auto& args : kiln::arguments()) {
        int a = args.at(0).get<int>();
        int b = args.at(1).get<int>();
        report.call([&] { return solution(a, b); });
    }
    report.print();
}
