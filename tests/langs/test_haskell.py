"""haskell through the real HTTP API and the real sandbox: GHC compiles the client's Checker.hs
with Solution.hs (langs/haskell), the checker prints the harness protocol."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "haskell"
CHECKER = (EXAMPLES / "Checker.hs").read_text()
SOLUTION = (EXAMPLES / "Solution.hs").read_text()
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed


def _missing() -> str | None:
    for exe in ("ghc", "gcc", "ld.lld"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/haskell/install.sh"
    if not (REPO / "langs" / "haskell" / "boot" / "main.o").is_file():
        return "langs/haskell/boot/main.o is not built: run langs/haskell/install.sh"
    return None


@pytest.fixture(scope="module")
def hs():
    reason = _missing()
    if reason:
        pytest.skip(f"haskell: {reason}")
    server = Server({"RUN_LANGS": "haskell", "RUN_CONCURRENCY": "2"}).wait_ready()
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="haskell", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(hs):
    body = run(hs, SOLUTION)
    assert body["stats"]["outcome"] == "exited"
    assert body["stderr"] == ""  # no compiler chatter, no linker warning
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, ""),
        ("result", 7, ""),
        ("result", 3, ""),
        ("result", 0, ""),
    ]
    assert all(float(i["time"]) >= 0 and len(i["time"].split(".")[1]) == 7 for i in got)


def test_an_error_in_one_call_leaves_the_others(hs):
    solution = "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b\n  | a == 3 = error \"three is not allowed\"\n  | otherwise = a `div` b\n"
    got = items(run(hs, solution))
    assert [i["type"] for i in got] == ["result", "error", "result", "error"]
    assert got[0]["value"] == 0 and got[2]["value"] == -2
    assert got[1]["value"] == "three is not allowed"
    assert got[3]["value"] == "divide by zero"


def test_output_is_captured_per_call(hs):
    solution = (
        "module Solution where\n\n"
        "import System.IO.Unsafe (unsafePerformIO)\n\n"
        "{-# NOINLINE solution #-}\n"
        "solution :: Int -> Int -> Int\n"
        "solution a b = unsafePerformIO $ do\n"
        '  putStrLn ("adding " ++ show a ++ " and " ++ show b ++ " \\233t\\233")\n'
        "  pure (a + b)\n"
    )
    got = items(run(hs, solution))
    assert [i["value"] for i in got] == [3, 7, 3, 0]
    assert [i["output"] for i in got] == [
        "adding 1 and 2 été\n",
        "adding 3 and 4 été\n",
        "adding 10 and -7 été\n",
        "adding 0 and 0 été\n",
    ]


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(hs):
    body = run(hs, "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b = a + \"b\"\n")
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "Solution.hs:4:" in body["stderr"] and "error" in body["stderr"]


def test_a_checker_that_does_not_compile(hs):
    body = run(hs, SOLUTION, checker="module Main (main) where\nimport Solution (solution)\nmain :: IO ()\nmain = print (solution 1)\n")
    assert body["exit_code"] not in (0, None)
    assert "Checker.hs:4:" in body["stderr"]


def test_an_infinite_loop_times_out(hs):
    solution = "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a _ = length (repeat a)\n"
    body = run(hs, solution, timeout="2s")
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None


# Codebattle's Haskell checker template: `module Checker where`, aeson objects printed one per
# line, and its entry point named `test` (no `main`); its solution template imports
# Data.HashMap.Lazy and lists the packages a solution may use.
CODEBATTLE_STYLE_CHECKER = """{-# LANGUAGE ScopedTypeVariables #-}
{-# LANGUAGE OverloadedStrings #-}
module Checker where

import qualified Data.Aeson as A
import qualified Data.ByteString.Lazy.Char8 as BS
import Data.HashMap.Lazy
import Control.Exception
import Solution
import System.Exit

output = BS.putStrLn . A.encode . A.object
handleOk = output ["status" A..= ("ok" :: String), "result" A..= ("__seed:42__" :: String)]
handleSuccess res exp args = output ["status" A..= ("success" :: String), "result" A..= res, "expected" A..= exp, "arguments" A..= args]
handleFailure res exp args = output ["status" A..= ("failure" :: String), "result" A..= res, "expected" A..= exp, "arguments" A..= args]
handleRuntimeError e = output ["status" A..= ("error" :: String), "result" A..= show e]

test :: IO ()
test = do

    let expected1 = 3
    let res1 = solution 1 2
    let resAssert1 = res1 == expected1

    (if resAssert1
    then handleSuccess res1 expected1 ("[1, 2]" :: String)
      else handleFailure res1 expected1 ("[1, 2]" :: String))
        `catch` \\(e ::ErrorCall) -> handleRuntimeError e

    let final_res = [True, resAssert1]

    if and final_res
      then handleOk
      else output []
"""

LIBRARIES_SOLUTION = """module Solution where

import qualified Data.HashMap.Lazy as HM
import qualified Data.Map as M
import qualified Data.Set as S
import qualified Data.Text as T
import qualified Data.Vector as V
import qualified Data.Vector.Algorithms.Intro as VA
import qualified Data.CaseInsensitive as CI
import Data.List.Split (splitOn)
import Text.Regex.Posix ((=~))
import Control.Monad.State (evalState, get, put)
import Data.Graph.Inductive ()
import Text.Megaparsec ()
import System.Random ()
import Data.Scientific ()
import Math.NumberTheory.Logarithms (intLog2)

solution :: Int -> Int -> Int
solution a b =
  let sorted = V.modify VA.sort (V.fromList [b, a])
      counted = evalState (get >>= \\n -> put (n + 1) >> get) (0 :: Int)
      matched = ("abc" =~ "b") :: Bool
      zeros =
        [ length (splitOn "," "x,y") - 2
        , HM.size (HM.fromList [(1 :: Int, 'x')]) - 1
        , M.size (M.fromList [(a, b)]) - 1
        , S.size (S.fromList [a, a]) - 1
        , T.length (T.pack "ab") - 2
        , if CI.mk "A" == CI.mk ("a" :: String) then 0 else 1
        , counted - 1
        , if matched then 0 else 1
        , intLog2 (2 :: Int) - 1
        ]
  in V.sum sorted + sum zeros
"""


def test_a_codebattle_style_checker_and_the_libraries_codebattle_lists(hs):
    body = run(hs, LIBRARIES_SOLUTION, checker=CODEBATTLE_STYLE_CHECKER)
    assert body["exit_code"] == 0, body
    assert [json.loads(line) for line in body["stdout"].splitlines()] == [
        {"status": "success", "result": 3, "expected": 3, "arguments": "[1, 2]"},
        {"status": "ok", "result": "__seed:42__"},
    ]


def test_a_checker_module_with_a_main(hs):
    checker = CHECKER.replace("module Main (main) where", "module Checker (main) where")
    assert "module Checker (main) where" in checker
    assert [i["value"] for i in items(run(hs, SOLUTION, checker=checker))] == [3, 7, 3, 0]


def test_two_runs_at_once_in_both_slots(hs):
    """Each slot runs as its own uid: the workspace must build for any of them."""
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda _: run(hs, SOLUTION), range(4)))
    for body in bodies:
        assert [i["value"] for i in items(body)] == [3, 7, 3, 0]
