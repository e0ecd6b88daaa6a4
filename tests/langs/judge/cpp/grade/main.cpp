#include <iostream>

// What a judge's build gives: optimized, ONLINE_JUDGE defined, nothing of kiln's /run prelude.
int main() {
    std::cout <<
#ifdef KILN_PRELUDE_HPP
        "prelude "
#endif
#if defined(__OPTIMIZE__) && defined(ONLINE_JUDGE)
        "judge-grade"
#else
        "debug"
#endif
        << "\n";
}
