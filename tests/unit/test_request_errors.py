"""Every 400 a client can see from /run's and /judge's body parsers, pinned byte for byte.

Clients and hidden suites match these messages, so a change to how fields are read must leave
each (status, message) as it is: EXPECTED was recorded from the parsers before the field readers
were shared (issue 34, item 6). parse_run and parse_judge are called directly, with a Runtime
built from the language table and a real Config (no server, no slots): python (judges, no client
harness), cpp (client harness), java (no limits.address_space), ruby (cannot judge).
A good body's row is ("ok", repr of what it parsed into), so defaults are pinned too.
"""

import json
import pathlib

import pytest

from kiln import config
from kiln.http.judge_request import parse_judge
from kiln.http.validate import parse_run
from kiln.langs import LANGUAGES
from kiln.runtime import Runtime, Workload

MiB = 1 << 20

import json
S = "\ud800"  # a lone surrogate, as JSON's "\ud800" decodes
ID = "sha256:" + "a" * 64
T = [{"stdin": "1", "expected": "1"}]
def J(**kw):  # a /judge body that is good but for what kw changes (None: the field left out)
    body = {"lang_slug": "python", "solution_text": "print(1)", "tests": T}
    for k, v in kw.items():
        if v is ...:
            body.pop(k, None)
        else:
            body[k] = v
    return body
def R(**kw):
    body = {"lang_slug": "python", "solution_text": "print(1)"}
    for k, v in kw.items():
        if v is ...:
            body.pop(k, None)
        else:
            body[k] = v
    return body
PROG = {"lang_slug": "cpp", "source": "int main(){}"}
CASES = [
    # --- both: the body itself ---
    ("run", "body not utf-8", b"\xff{}"),
    ("run", "body not json", b"{"),
    ("run", "body NaN", b'{"lang_slug": NaN}'),
    ("run", "body an array", b"[]"),
    ("run", "body nested deep", b"[" * 100000 + b"]" * 100000),
    ("judge", "body not utf-8", b"\xff{}"),
    ("judge", "body not json", b"{"),
    ("judge", "body Infinity", b"Infinity"),
    ("judge", "body a string", b'"x"'),
    # --- /run ---
    ("run", "lang_slug missing", R(lang_slug=...)),
    ("run", "lang_slug null", R(lang_slug=None)),
    ("run", "lang_slug a number", R(lang_slug=1)),
    ("run", "lang_slug unknown", R(lang_slug="cobol")),
    ("run", "solution_text missing", R(solution_text=...)),
    ("run", "solution_text a list", R(solution_text=["x"])),
    ("run", "solution_text surrogate", R(solution_text=S)),
    ("run", "checker_text a number", R(checker_text=1)),
    ("run", "checker_text missing for cpp", R(lang_slug="cpp")),
    ("run", "checker_text surrogate", R(lang_slug="cpp", checker_text=S)),
    ("run", "stdin a bool", R(stdin=True)),
    ("run", "stdin surrogate", R(stdin=S)),
    ("run", "asserts a number", R(asserts=5)),
    ("run", "asserts out of float range", b'{"lang_slug":"python","solution_text":"x","asserts":[1e400]}'),
    ("run", "asserts surrogate", R(asserts=S)),
    ("run", "asserts list surrogate", R(asserts=[S])),
    ("run", "timeout a number", R(timeout=5)),
    ("run", "timeout not a duration", R(timeout="soon")),
    ("run", "timeout long garbage", R(timeout="x" * 100)),
    ("run", "timeout zero", R(timeout="0s")),
    ("run", "timeout above max", R(timeout="9999s")),
    ("run", "limits a list", R(limits=[])),
    ("run", "limits unknown", R(limits={"time": "1s", "zz": 1})),
    ("run", "limits.memory a float", R(limits={"memory": 1.5})),
    ("run", "limits.memory not a size", R(limits={"memory": "lots"})),
    ("run", "limits.memory too low", R(limits={"memory": 1000})),
    ("run", "limits.memory above max", R(limits={"memory": "100g"})),
    ("run", "limits.pids zero", R(limits={"pids": 0})),
    ("run", "limits.pids a string", R(limits={"pids": "5"})),
    ("run", "limits.pids above max", R(limits={"pids": 100000})),
    ("run", "limits.output zero", R(limits={"output": 0})),
    ("run", "limits.output above max", R(limits={"output": "1g"})),
    ("run", "limits.memory bool", R(limits={"memory": True})),
    ("run", "order: type before slug", R(lang_slug="cobol", timeout=1)),
    ("run", "order: limits type before slug", R(lang_slug="cobol", limits=1)),
    ("run", "order: surrogate before slug", R(lang_slug="cobol", solution_text=S)),
    ("run", "order: slug before limits rows", R(lang_slug="cobol", limits={"zz": 1})),
    ("run", "ok python", R(stdin="1", asserts={"a": [1]}, timeout="2s", limits={"memory": "64m", "pids": 8, "output": 100})),
    ("run", "ok cpp", R(lang_slug="cpp", checker_text="c", asserts="[]")),
    # --- /judge ---
    ("judge", "lang_slug missing", J(lang_slug=...)),
    ("judge", "lang_slug a number", J(lang_slug=3)),
    ("judge", "lang_slug unknown", J(lang_slug="cobol")),
    ("judge", "lang_slug cannot judge", J(lang_slug="ruby")),
    ("judge", "solution_text missing", J(solution_text=...)),
    ("judge", "solution_text a dict", J(solution_text={})),
    ("judge", "solution_text surrogate", J(solution_text=S)),
    ("judge", "interactor a string", J(interactor="x")),
    ("judge", "interactor.lang_slug missing", J(interactor={"source": "x"})),
    ("judge", "interactor.source a number", J(interactor={"lang_slug": "cpp", "source": 1})),
    ("judge", "interactor.lang_slug unknown", J(interactor={"lang_slug": "cobol", "source": "x"})),
    ("judge", "interactor.lang_slug cannot judge", J(interactor={"lang_slug": "ruby", "source": "x"})),
    ("judge", "interactor.source surrogate", J(interactor={"lang_slug": "cpp", "source": S})),
    ("judge", "interactor.files given name", J(interactor={**PROG, "files": {"input": "x"}})),
    ("judge", "interactor.files judge file", J(interactor={**PROG, "files": {"main.cpp": "x"}})),
    ("judge", "interactor with compare tokens", J(interactor=PROG, compare="tokens")),
    ("judge", "interactor and checker, compare lines", J(interactor=PROG, checker=PROG, compare="lines")),
    ("judge", "interactor and checker, compare long", J(interactor=PROG, checker=PROG, compare=["x" * 80])),
    ("judge", "compare a number", J(compare=1)),
    ("judge", "compare unknown", J(compare="fuzzy" * 20)),
    ("judge", "compare checker without checker", J(compare="checker")),
    ("judge", "checker with compare tokens", J(checker=PROG, compare="tokens")),
    ("judge", "checker a list", J(checker=[])),
    ("judge", "checker.files a list", J(checker={**PROG, "files": []}, compare="checker")),
    ("judge", "checker.files given name", J(checker={**PROG, "files": {"answer": "x"}}, compare="checker")),
    ("judge", "checker.files content surrogate", J(checker={**PROG, "files": {"a.txt": S}}, compare="checker")),
    ("judge", "epsilon negative", J(epsilon=-1)),
    ("judge", "epsilon a string", J(epsilon="0.1")),
    ("judge", "epsilon bool", J(epsilon=True)),
    ("judge", "ignore_case a string", J(ignore_case="yes")),
    ("judge", "ignore_case with checker", J(ignore_case=True, checker=PROG, compare="checker")),
    ("judge", "absolute_epsilon negative", J(compare="float", absolute_epsilon=-1)),
    ("judge", "relative_epsilon a string", J(compare="line_floats", relative_epsilon="0.1")),
    ("judge", "epsilon with absolute_epsilon", J(compare="float", epsilon=0.1, absolute_epsilon=0.1)),
    ("judge", "absolute_epsilon with tokens", J(absolute_epsilon=0.1)),
    ("judge", "float_rule with checker", J(float_rule="kattis", checker=PROG, compare="checker")),
    ("judge", "float_rule unknown", J(compare="float", float_rule="ieee" * 20)),
    ("judge", "float_rule a number", J(compare="float", float_rule=1)),
    ("judge", "float_rule dmoj with two tolerances", J(compare="line_floats", float_rule="dmoj", absolute_epsilon=0.1, relative_epsilon=0.2)),
    ("judge", "files a list", J(files=[])),
    ("judge", "files too many", J(files={f"f{i}": "x" for i in range(65)})),
    ("judge", "files bad name", J(files={"../etc": "x"})),
    ("judge", "files dot name", J(files={".hidden": "x"})),
    ("judge", "files judge file", J(files={"main.py": "x"})),
    ("judge", "files content a number", J(files={"a.txt": 1})),
    ("judge", "files content extra keys", J(files={"a.txt": {"file": ID, "x": 1}})),
    ("judge", "files content bad id", J(files={"a.txt": {"file": "sha256:zz"}})),
    ("judge", "files content surrogate", J(files={"a.txt": S})),
    ("judge", "tests missing", J(tests=...)),
    ("judge", "tests a dict", J(tests={})),
    ("judge", "tests empty", J(tests=[])),
    ("judge", "tests too many", J(tests=[{"stdin": "", "expected": ""}] * 1001)),
    ("judge", "test not an object", J(tests=[1])),
    ("judge", "test stdin and stdin_file", J(tests=[{"stdin": "1", "stdin_file": ID, "expected": "1"}])),
    ("judge", "test stdin a number", J(tests=[{"stdin": 1, "expected": "1"}])),
    ("judge", "test stdin surrogate", J(tests=[{"stdin": S, "expected": "1"}])),
    ("judge", "test stdin_file bad", J(tests=[{"stdin_file": "x", "expected": "1"}])),
    ("judge", "test expected missing", J(tests=[{"stdin": "1"}])),
    ("judge", "test expected a list", J(tests=[{"stdin": "1", "expected": []}])),
    ("judge", "test expected_file bad", J(tests=[{"expected_file": 5}])),
    ("judge", "test points negative", J(tests=[{"stdin": "1", "expected": "1", "points": -1}])),
    ("judge", "test points a string", J(tests=[{"stdin": "1", "expected": "1", "points": "1"}])),
    ("judge", "test points huge", b'{"lang_slug":"python","solution_text":"x","tests":[{"expected":"","points":1e400}]}'),
    ("judge", "groups a dict", J(groups={})),
    ("judge", "group not an object", J(groups=[1])),
    ("judge", "group unknown field", J(groups=[{"name": "a", "tests": [0], "points": 1, "weight": 2}])),
    ("judge", "group name missing", J(groups=[{"tests": [0], "points": 1}])),
    ("judge", "group name a number", J(groups=[{"name": 1, "tests": [0], "points": 1}])),
    ("judge", "group name empty", J(groups=[{"name": "", "tests": [0], "points": 1}])),
    ("judge", "group name duplicate", J(tests=T * 2, groups=[{"name": "a", "tests": [0], "points": 1}, {"name": "a", "tests": [1], "points": 1}])),
    ("judge", "group tests out of range", J(groups=[{"name": "a", "tests": [1], "points": 1}])),
    ("judge", "group tests overlap", J(tests=T * 2, groups=[{"name": "a", "tests": [0], "points": 1}, {"name": "b", "tests": [0, 1], "points": 1}])),
    ("judge", "group scoring unknown", J(groups=[{"name": "a", "tests": [0], "points": 1, "scoring": "max"}])),
    ("judge", "group points missing", J(groups=[{"name": "a", "tests": [0]}])),
    ("judge", "group sum points negative", J(groups=[{"name": "a", "tests": [0], "scoring": "sum", "points": -1}])),
    ("judge", "group depends a string", J(groups=[{"name": "a", "tests": [0], "points": 1, "depends": "b"}])),
    ("judge", "group depends unknown", J(groups=[{"name": "a", "tests": [0], "points": 1, "depends": ["b"]}])),
    ("judge", "limits a list", J(limits=[])),
    ("judge", "limits unknown", J(limits={"cpu": 1})),
    ("judge", "limits.time a number", J(limits={"time": 1})),
    ("judge", "limits.time zero", J(limits={"time": "0ms"})),
    ("judge", "limits.time above max", J(limits={"time": "9999s"})),
    ("judge", "limits.wall_time below time", J(limits={"time": "2s", "wall_time": "1s"})),
    ("judge", "limits.wall_time bad", J(limits={"wall_time": "later"})),
    ("judge", "limits.memory too low", J(limits={"memory": 1})),
    ("judge", "limits.memory above max", J(limits={"memory": "64g"})),
    ("judge", "limits.output a list", J(limits={"output": []})),
    ("judge", "limits.pids negative", J(limits={"pids": -3})),
    ("judge", "limits.pids above max", J(limits={"pids": 65536})),
    ("judge", "limits.address_space for java", J(lang_slug="java", limits={"address_space": "1g"})),
    ("judge", "limits.address_space too low", J(limits={"address_space": 1000})),
    ("judge", "limits.address_space bad", J(limits={"address_space": "big"})),
    ("judge", "compile_timeout a number", J(compile_timeout=30)),
    ("judge", "compile_timeout above max", J(compile_timeout="9999s")),
    ("judge", "stop_on_failure a string", J(stop_on_failure="true")),
    ("judge", "order: slug before interactor", J(lang_slug="cobol", interactor=1)),
    ("judge", "order: tests before points", J(tests=[1, {"expected": "", "points": -1}])),
    ("judge", "order: points before limits", J(tests=[{"expected": "", "points": -1}], limits=1)),
    ("judge", "order: limits before compile_timeout", J(limits=1, compile_timeout=1)),
    ("judge", "order: compile_timeout before stop_on_failure", J(compile_timeout=1, stop_on_failure=1)),
    ("judge", "order: stop_on_failure before groups", J(stop_on_failure=1, groups=1)),
    ("judge", "ok line_floats dmoj relative", J(compare="line_floats", float_rule="dmoj", relative_epsilon=1e-4)),
    ("judge", "ok exact_floats kattis", J(compare="exact_floats", float_rule="kattis", absolute_epsilon=10**400, relative_epsilon=0.5)),
    ("judge", "ok tokens", J(epsilon=0.5, ignore_case=True, files={"a.txt": "x", "b.txt": {"file": ID}}, limits={"time": "2s", "memory": "64m", "pids": 4, "output": 10, "address_space": "1g"}, compile_timeout="5s", stop_on_failure=True)),
    ("judge", "ok checker", J(checker={**PROG, "files": {"x.txt": "1"}}, compare="checker", tests=[{"stdin_file": ID}])),
    ("judge", "ok interactor", J(interactor=PROG, tests=[{"stdin": "1"}], groups=[{"name": "a", "tests": [0], "points": 5, "depends": []}])),
    ("judge1", "interactor on one slot", J(interactor=PROG)),
]

EXPECTED = {
    ('run', 'body not utf-8'): (400, 'body is not UTF-8'),
    ('run', 'body not json'): (400, 'body is not valid JSON'),
    ('run', 'body NaN'): (400, 'body is not valid JSON'),
    ('run', 'body an array'): (400, 'body must be a JSON object'),
    ('run', 'body nested deep'): (400, 'body is not valid JSON'),
    ('judge', 'body not utf-8'): (400, 'body is not UTF-8'),
    ('judge', 'body not json'): (400, 'body is not valid JSON'),
    ('judge', 'body Infinity'): (400, 'body is not valid JSON'),
    ('judge', 'body a string'): (400, 'body must be a JSON object'),
    ('run', 'lang_slug missing'): (400, 'lang_slug is required'),
    ('run', 'lang_slug null'): (400, 'lang_slug is required'),
    ('run', 'lang_slug a number'): (400, 'lang_slug must be a string'),
    ('run', 'lang_slug unknown'): (400, 'unsupported lang_slug'),
    ('run', 'solution_text missing'): (400, 'solution_text is required'),
    ('run', 'solution_text a list'): (400, 'solution_text must be a string'),
    ('run', 'solution_text surrogate'): (400, 'solution_text is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'checker_text a number'): (400, 'checker_text must be a string or null'),
    ('run', 'checker_text missing for cpp'): (400, 'checker_text is required'),
    ('run', 'checker_text surrogate'): (400, 'checker_text is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'stdin a bool'): (400, 'stdin must be a string or null'),
    ('run', 'stdin surrogate'): (400, 'stdin is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'asserts a number'): (400, 'asserts must be a string, an array, an object or null'),
    ('run', 'asserts out of float range'): (400, 'asserts holds a number out of the range of a 64-bit float; send asserts as a string to pass it verbatim'),
    ('run', 'asserts surrogate'): (400, 'asserts is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'asserts list surrogate'): (400, 'asserts is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'timeout a number'): (400, 'timeout must be a duration string such as "500ms", "2s" or "1m"'),
    ('run', 'timeout not a duration'): (400, 'timeout \'soon\' is not a duration such as "500ms", "2s" or "1m"'),
    ('run', 'timeout long garbage'): (400, 'timeout \'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\' is not a duration such as "500ms", "2s" or "1m"'),
    ('run', 'timeout zero'): (400, 'timeout must be above zero'),
    ('run', 'timeout above max'): (400, 'timeout 9999s is above its maximum of 5m'),
    ('run', 'limits a list'): (400, 'limits must be an object (memory, pids, output)'),
    ('run', 'limits unknown'): (400, 'limits.time: /run takes only memory, pids and output (a time limit is its timeout)'),
    ('run', 'limits.memory a float'): (400, 'limits.memory must be a size: bytes as an integer, or a string such as "256m"'),
    ('run', 'limits.memory not a size'): (400, 'limits.memory \'lots\' is not a size such as 65536, "64k", "256m" or "1g"'),
    ('run', 'limits.memory too low'): (400, 'limits.memory must be at least 1m'),
    ('run', 'limits.memory above max'): (400, 'limits.memory 100g is above its maximum of 256m'),
    ('run', 'limits.pids zero'): (400, 'limits.pids must be a whole number >= 1'),
    ('run', 'limits.pids a string'): (400, 'limits.pids must be a whole number >= 1'),
    ('run', 'limits.pids above max'): (400, 'limits.pids 100000 is above its maximum of 64'),
    ('run', 'limits.output zero'): (400, 'limits.output must be at least 1'),
    ('run', 'limits.output above max'): (400, 'limits.output 1g is above its maximum of 1m'),
    ('run', 'limits.memory bool'): (400, 'limits.memory must be a size: bytes as an integer, or a string such as "256m"'),
    ('run', 'order: type before slug'): (400, 'timeout must be a duration string such as "500ms", "2s" or "1m"'),
    ('run', 'order: limits type before slug'): (400, 'limits must be an object (memory, pids, output)'),
    ('run', 'order: surrogate before slug'): (400, 'solution_text is not valid UTF-8 text (it contains a lone surrogate)'),
    ('run', 'order: slug before limits rows'): (400, 'unsupported lang_slug'),
    ('run', 'ok python'): ('ok', 'RunRequest(slug=\'python\', timeout_ms=2000, files=((\'solution\', b\'print(1)\'), (\'asserts\', b\'{"a":[1]}\')), stdin=b\'1\', limits=Limits(cpu_ms=0, memory=67108864, pids=8, output=100, address_space=0))'),
    ('run', 'ok cpp'): ('ok', "RunRequest(slug='cpp', timeout_ms=30000, files=(('solution', b'print(1)'), ('client_harness', b'c'), ('asserts', b'[]')), stdin=None, limits=Limits(cpu_ms=0, memory=0, pids=0, output=0, address_space=0))"),
    ('judge', 'lang_slug missing'): (400, 'lang_slug is required'),
    ('judge', 'lang_slug a number'): (400, 'lang_slug must be a string'),
    ('judge', 'lang_slug unknown'): (400, 'unsupported lang_slug'),
    ('judge', 'lang_slug cannot judge'): (400, 'lang_slug ruby cannot judge'),
    ('judge', 'solution_text missing'): (400, 'solution_text is required'),
    ('judge', 'solution_text a dict'): (400, 'solution_text must be a string'),
    ('judge', 'solution_text surrogate'): (400, 'solution_text is not valid UTF-8 text (it contains a lone surrogate)'),
    ('judge', 'interactor a string'): (400, 'interactor must be an object {"lang_slug": ..., "source": ...}'),
    ('judge', 'interactor.lang_slug missing'): (400, 'interactor.lang_slug is required'),
    ('judge', 'interactor.source a number'): (400, 'interactor.source must be a string'),
    ('judge', 'interactor.lang_slug unknown'): (400, 'interactor.lang_slug: unsupported lang_slug'),
    ('judge', 'interactor.lang_slug cannot judge'): (400, 'interactor.lang_slug ruby cannot judge'),
    ('judge', 'interactor.source surrogate'): (400, 'interactor.source is not valid UTF-8 text (it contains a lone surrogate)'),
    ('judge', 'interactor.files given name'): (400, "interactor.files: 'input' is the name of a file kiln gives the interactor for each test (input, record, answer)"),
    ('judge', 'interactor.files judge file'): (400, "interactor.files: 'main.cpp' is the judge file's name (interactor.source is written there)"),
    ('judge', 'interactor with compare tokens'): (400, 'interactor is given: compare must not be (the interactor gives the verdict)'),
    ('judge', 'interactor and checker, compare lines'): (400, 'interactor and checker are given: compare must be checker or omitted (got lines)'),
    ('judge', 'interactor and checker, compare long'): (400, "interactor and checker are given: compare must be checker or omitted (got ['xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx)"),
    ('judge', 'compare a number'): (400, 'compare must be a string'),
    ('judge', 'compare unknown'): (400, "compare must be one of tokens, line_tokens, lines, exact, float, line_floats, exact_floats, checker, none (got 'fuzzyfuzzyfuzzyfuzzyfuzzyfuzzyfuzzyfuzzy')"),
    ('judge', 'compare checker without checker'): (400, 'checker is required when compare is checker'),
    ('judge', 'checker with compare tokens'): (400, 'checker is given: compare must be checker (got tokens)'),
    ('judge', 'checker a list'): (400, 'checker must be an object {"lang_slug": ..., "source": ...}'),
    ('judge', 'checker.files a list'): (400, 'checker.files must be an object of file name -> text or {"file": id}'),
    ('judge', 'checker.files given name'): (400, "checker.files: 'answer' is the name of a file kiln gives the checker for each test (input, output, answer)"),
    ('judge', 'checker.files content surrogate'): (400, 'checker.files.a.txt is not valid UTF-8 text (it contains a lone surrogate)'),
    ('judge', 'epsilon negative'): (400, 'epsilon must be a number >= 0'),
    ('judge', 'epsilon a string'): (400, 'epsilon must be a number >= 0'),
    ('judge', 'epsilon bool'): (400, 'epsilon must be a number >= 0'),
    ('judge', 'ignore_case a string'): (400, 'ignore_case must be a boolean (true or false)'),
    ('judge', 'ignore_case with checker'): (400, 'ignore_case applies to compare tokens, line_tokens, lines, exact, float, line_floats, exact_floats (got compare checker): a checker or interactor decides case itself'),
    ('judge', 'float_rule dmoj with two tolerances'): (400, "float_rule dmoj takes absolute_epsilon and relative_epsilon equal (DMOJ's error_mode default) or one of them alone (absolute, relative)"),
    ('judge', 'float_rule a number'): (400, 'float_rule must be a string'),
    ('judge', 'float_rule unknown'): (400, "float_rule must be one of decimal, kattis, dmoj (got 'ieeeieeeieeeieeeieeeieeeieeeieeeieeeieee')"),
    ('judge', 'float_rule with checker'): (400, 'float_rule applies to compare float, line_floats, exact_floats (got compare checker)'),
    ('judge', 'absolute_epsilon with tokens'): (400, 'absolute_epsilon applies to compare float, line_floats, exact_floats (got compare tokens)'),
    ('judge', 'epsilon with absolute_epsilon'): (400, 'epsilon sets both absolute_epsilon and relative_epsilon: give epsilon alone, or absolute_epsilon and/or relative_epsilon'),
    ('judge', 'relative_epsilon a string'): (400, 'relative_epsilon must be a number >= 0'),
    ('judge', 'absolute_epsilon negative'): (400, 'absolute_epsilon must be a number >= 0'),
    ('judge', 'files a list'): (400, 'files must be an object of file name -> text or {"file": id}'),
    ('judge', 'files too many'): (400, 'files: at most 64 files'),
    ('judge', 'files bad name'): (400, "files: '../etc' is not a file name ([A-Za-z0-9_][A-Za-z0-9_.-]{0,99}: no '/', no '..', no leading '.')"),
    ('judge', 'files dot name'): (400, "files: '.hidden' is not a file name ([A-Za-z0-9_][A-Za-z0-9_.-]{0,99}: no '/', no '..', no leading '.')"),
    ('judge', 'files judge file'): (400, "files: 'main.py' is the judge file's name (solution_text is written there)"),
    ('judge', 'files content a number'): (400, 'files.a.txt must be a string or {"file": "sha256:..."} (a file POST /files stored)'),
    ('judge', 'files content extra keys'): (400, 'files.a.txt must be a string or {"file": "sha256:..."} (a file POST /files stored)'),
    ('judge', 'files content bad id'): (400, 'files.a.txt.file must be a file id sha256:<64 lowercase hex> (POST /files answers it)'),
    ('judge', 'files content surrogate'): (400, 'files.a.txt is not valid UTF-8 text (it contains a lone surrogate)'),
    ('judge', 'tests missing'): (400, 'tests is required'),
    ('judge', 'tests a dict'): (400, 'tests must be an array of {stdin or stdin_file, expected or expected_file}'),
    ('judge', 'tests empty'): (400, 'tests must have 1 to 1000 tests (got 0)'),
    ('judge', 'tests too many'): (400, 'tests must have 1 to 1000 tests (got 1001)'),
    ('judge', 'test not an object'): (400, 'tests[0] must be an object'),
    ('judge', 'test stdin and stdin_file'): (400, 'tests[0]: stdin and stdin_file are exclusive: give one'),
    ('judge', 'test stdin a number'): (400, 'tests[0].stdin must be a string'),
    ('judge', 'test stdin surrogate'): (400, 'tests[0].stdin is not valid UTF-8 text (it contains a lone surrogate)'),
    ('judge', 'test stdin_file bad'): (400, 'tests[0].stdin_file must be a file id sha256:<64 lowercase hex> (POST /files answers it)'),
    ('judge', 'test expected missing'): (400, 'tests[0]: expected or expected_file is required (unless compare is checker or none, or an interactor is given)'),
    ('judge', 'test expected a list'): (400, 'tests[0].expected must be a string'),
    ('judge', 'test expected_file bad'): (400, 'tests[0].expected_file must be a file id sha256:<64 lowercase hex> (POST /files answers it)'),
    ('judge', 'test points negative'): (400, 'tests[0].points must be a number >= 0'),
    ('judge', 'test points a string'): (400, 'tests[0].points must be a number >= 0'),
    ('judge', 'test points huge'): (400, 'tests[0].points must be a number >= 0'),
    ('judge', 'groups a dict'): (400, 'groups must be an array of {"name", "tests", "points", "scoring", "depends"}'),
    ('judge', 'group not an object'): (400, 'groups[0] must be an object'),
    ('judge', 'group unknown field'): (400, 'groups[0].weight: not a field of a group (name, tests, points, scoring, depends)'),
    ('judge', 'group name missing'): (400, 'groups[0].name is required'),
    ('judge', 'group name a number'): (400, 'groups[0].name must be a string'),
    ('judge', 'group name empty'): (400, "groups[0].name must be 1 to 100 characters, each group's its own"),
    ('judge', 'group name duplicate'): (400, "groups[1].name must be 1 to 100 characters, each group's its own"),
    ('judge', 'group tests out of range'): (400, 'groups[0].tests must be a non-empty array of test indexes (0 to 0)'),
    ('judge', 'group tests overlap'): (400, "groups[1].tests: test 0 is already in group 'a' (a test is in one group at most)"),
    ('judge', 'group scoring unknown'): (400, 'groups[0].scoring must be one of all, min, sum'),
    ('judge', 'group points missing'): (400, "groups[0].points must be a number >= 0 (the group's points)"),
    ('judge', 'group sum points negative'): (400, 'groups[0].points must be a number >= 0'),
    ('judge', 'group depends a string'): (400, 'groups[0].depends must be an array of group names'),
    ('judge', 'group depends unknown'): (400, "groups[0].depends: 'b' names no group given before it"),
    ('judge', 'limits a list'): (400, 'limits must be an object (time, wall_time, memory, output, pids, address_space)'),
    ('judge', 'limits unknown'): (400, 'limits.cpu: not a limit (one of time, wall_time, memory, output, pids, address_space)'),
    ('judge', 'limits.time a number'): (400, 'limits.time must be a duration string such as "500ms", "2s" or "1m"'),
    ('judge', 'limits.time zero'): (400, 'limits.time must be above zero'),
    ('judge', 'limits.time above max'): (400, 'limits.time 9999s is above its maximum of 10s'),
    ('judge', 'limits.wall_time below time'): (400, 'limits.wall_time (1s) is below limits.time (2s)'),
    ('judge', 'limits.wall_time bad'): (400, 'limits.wall_time \'later\' is not a duration such as "500ms", "2s" or "1m"'),
    ('judge', 'limits.memory too low'): (400, 'limits.memory must be at least 1m'),
    ('judge', 'limits.memory above max'): (400, 'limits.memory 64g is above its maximum of 256m'),
    ('judge', 'limits.output a list'): (400, 'limits.output must be a size: bytes as an integer, or a string such as "256m"'),
    ('judge', 'limits.pids negative'): (400, 'limits.pids must be a whole number >= 1'),
    ('judge', 'limits.pids above max'): (400, 'limits.pids 65536 is above its maximum of 64'),
    ('judge', 'limits.address_space for java'): (400, "limits.address_space: java's runtime reserves address space it never uses, so that limit would say nothing of its memory; use limits.memory (resident memory)"),
    ('judge', 'limits.address_space too low'): (400, 'limits.address_space must be at least 1m'),
    ('judge', 'limits.address_space bad'): (400, 'limits.address_space \'big\' is not a size such as 65536, "64k", "256m" or "1g"'),
    ('judge', 'compile_timeout a number'): (400, 'compile_timeout must be a duration string such as "500ms", "2s" or "1m"'),
    ('judge', 'compile_timeout above max'): (400, 'compile_timeout 9999s is above its maximum of 5m'),
    ('judge', 'stop_on_failure a string'): (400, 'stop_on_failure must be a boolean (true or false)'),
    ('judge', 'order: slug before interactor'): (400, 'unsupported lang_slug'),
    ('judge', 'order: tests before points'): (400, 'tests[0] must be an object'),
    ('judge', 'order: points before limits'): (400, 'tests[0].points must be a number >= 0'),
    ('judge', 'order: limits before compile_timeout'): (400, 'limits must be an object (time, wall_time, memory, output, pids, address_space)'),
    ('judge', 'order: compile_timeout before stop_on_failure'): (400, 'compile_timeout must be a duration string such as "500ms", "2s" or "1m"'),
    ('judge', 'order: stop_on_failure before groups'): (400, 'stop_on_failure must be a boolean (true or false)'),
    ('judge', 'ok line_floats dmoj relative'): ('ok', "JudgeRequest(slug='python', files=(('main.py', Source(text=b'print(1)', file_id=None)),), tests=(Test(stdin=Source(text=b'1', file_id=None), expected=Source(text=b'1', file_id=None), index=0),), compare='line_floats', tolerance=Tolerance(absolute=0.0, relative=0.0001, rule='dmoj'), limits=TestLimits(time_ms=1000, wall_time_ms=3000, memory=268435456, output=1048576, pids=64, address_space=0), compile_timeout_ms=30000, stop_on_failure=False, ignore_case=False, checker=None, interactor=None, scoring=Scoring(points=(None,), groups=()))"),
    ('judge', 'ok exact_floats kattis'): ('ok', "JudgeRequest(slug='python', files=(('main.py', Source(text=b'print(1)', file_id=None)),), tests=(Test(stdin=Source(text=b'1', file_id=None), expected=Source(text=b'1', file_id=None), index=0),), compare='exact_floats', tolerance=Tolerance(absolute=inf, relative=0.5, rule='kattis'), limits=TestLimits(time_ms=1000, wall_time_ms=3000, memory=268435456, output=1048576, pids=64, address_space=0), compile_timeout_ms=30000, stop_on_failure=False, ignore_case=False, checker=None, interactor=None, scoring=Scoring(points=(None,), groups=()))"),
    ('judge', 'ok tokens'): ('ok', "JudgeRequest(slug='python', files=(('main.py', Source(text=b'print(1)', file_id=None)), ('a.txt', Source(text=b'x', file_id=None)), ('b.txt', Source(text=None, file_id='sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'))), tests=(Test(stdin=Source(text=b'1', file_id=None), expected=Source(text=b'1', file_id=None), index=0),), compare='tokens', tolerance=Tolerance(absolute=0.5, relative=0.5, rule='decimal'), limits=TestLimits(time_ms=2000, wall_time_ms=5000, memory=67108864, output=10, pids=4, address_space=1073741824), compile_timeout_ms=5000, stop_on_failure=True, ignore_case=True, checker=None, interactor=None, scoring=Scoring(points=(None,), groups=()))"),
    ('judge', 'ok checker'): ('ok', "JudgeRequest(slug='python', files=(('main.py', Source(text=b'print(1)', file_id=None)),), tests=(Test(stdin=Source(text=None, file_id='sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'), expected=None, index=0),), compare='checker', tolerance=Tolerance(absolute=1e-06, relative=1e-06, rule='decimal'), limits=TestLimits(time_ms=1000, wall_time_ms=3000, memory=268435456, output=1048576, pids=64, address_space=0), compile_timeout_ms=30000, stop_on_failure=False, ignore_case=False, checker=Program(role='checker', slug='cpp', files=(('main.cpp', Source(text=b'int main(){}', file_id=None)), ('x.txt', Source(text=b'1', file_id=None)))), interactor=None, scoring=Scoring(points=(None,), groups=()))"),
    ('judge', 'ok interactor'): ('ok', "JudgeRequest(slug='python', files=(('main.py', Source(text=b'print(1)', file_id=None)),), tests=(Test(stdin=Source(text=b'1', file_id=None), expected=None, index=0),), compare='interactor', tolerance=Tolerance(absolute=1e-06, relative=1e-06, rule='decimal'), limits=TestLimits(time_ms=1000, wall_time_ms=3000, memory=268435456, output=1048576, pids=64, address_space=0), compile_timeout_ms=30000, stop_on_failure=False, ignore_case=False, checker=None, interactor=Program(role='interactor', slug='cpp', files=(('main.cpp', Source(text=b'int main(){}', file_id=None)),)), scoring=Scoring(points=(None,), groups=(Group(name='a', tests=(0,), points=5.0, scoring='all', depends=()),)))"),
    ('judge1', 'interactor on one slot'): (400, 'interactor: this server runs one slot (RUN_CONCURRENCY=1); an interactive test needs two at once'),
}


def _runtime(tmp_path: pathlib.Path, concurrency: int) -> Runtime:
    (tmp_path / "langs").mkdir(exist_ok=True)
    cfg = config.load({"RUN_CONCURRENCY": str(concurrency)}, tmp_path)
    judging = ("python", "cpp", "java")
    workloads = {
        slug: Workload(
            language=LANGUAGES[slug], lower=slug, script="", argv=(), tmp_size=64 * MiB, memory_max=256 * MiB, pids_max=64,
            build_argv=("build",) if slug in judging else None, exec_argv=("exec",) if slug in judging else None,
        )
        for slug in ("python", "cpp", "java", "ruby")
    }
    return Runtime(cfg, workloads, (), (), "/nonexistent/staging", 2, {}, b"", (256 * MiB, 64))


def answer(endpoint: str, body, tmp_path: pathlib.Path):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    parse = parse_run if endpoint == "run" else parse_judge
    try:
        return ("ok", repr(parse(raw, _runtime(tmp_path, 1 if endpoint == "judge1" else 4))))
    except Exception as error:  # ApiError, by name: the test must not depend on where it lives
        if type(error).__name__ != "ApiError":
            raise
        assert not error.headers, "a field's error closes nothing"
        return (error.status, error.error)


def test_every_case_is_pinned():
    assert len(CASES) >= 60
    assert sorted(EXPECTED) == sorted((endpoint, name) for endpoint, name, _ in CASES)


@pytest.mark.parametrize("endpoint,name,body", CASES, ids=[f"{e}:{n}" for e, n, _ in CASES])
def test_answer_is_unchanged(endpoint, name, body, tmp_path):
    assert answer(endpoint, body, tmp_path) == EXPECTED[(endpoint, name)]


BEYOND_A_DOUBLE = b"1" + b"0" * 400  # an integer JSON allows and no double holds


@pytest.mark.parametrize(
    "body,message",
    [
        (b'{"lang_slug":"python","solution_text":"x","tests":[{"expected":"","points":%s}]}' % BEYOND_A_DOUBLE, "tests[0].points must be a number >= 0"),
        (b'{"lang_slug":"python","solution_text":"x","tests":[{"expected":""}],"groups":[{"name":"a","tests":[0],"points":%s}]}' % BEYOND_A_DOUBLE, "groups[0].points must be a number >= 0 (the group's points)"),
    ],
)
def test_points_beyond_a_double_are_refused_as_1e400_is(body, message, tmp_path):
    """Before fields.number, float() of such an integer raised OverflowError: a 500 "internal"."""
    assert answer("judge", body, tmp_path) == (400, message)
