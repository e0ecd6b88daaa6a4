"""swift through the real HTTP API and the real sandbox: swiftc builds the client's
check/checker.swift with check/solution.swift (langs/swift), the client harness prints the protocol.

Skipped where no Swift toolchain is installed: Debian 12 (glibc 2.36) has no package for it,
Debian 13's swiftlang needs glibc >= 2.38 (langs/swift/README.md).

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("swift")
SWIFT = langcase.LANGS["swift"]


def test_a_trap_in_a_call_ends_the_client_harness(lang_server):
    """Swift has no exceptions to catch: a runtime trap kills the client harness (SIGILL or SIGTRAP)."""
    body = SWIFT.run(lang_server, 'func solution(_ a: Int, _ b: Int) -> Int {\n    if a == 3 { fatalError("three") }\n    return a + b\n}\n')
    assert body["exit_code"] not in (0, None)
    assert body["stats"]["outcome"] == "signaled"
