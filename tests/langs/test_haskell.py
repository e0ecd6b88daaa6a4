"""haskell through the real HTTP API and the real sandbox: GHC compiles the client's Checker.hs
with Solution.hs (langs/haskell), the checker prints the harness protocol."""

from __future__ import annotations

import json

import pytest

import langcase
from kilntest import REPO

CHECKER = langcase.example("haskell", "Checker.hs")
SOLUTION = langcase.example("haskell", "Solution.hs")
HASKELL = langcase.Lang("haskell", checker=CHECKER, one_line=False)
PAIRS = [[1, 2], [3, 4], [10, -7], [0, 0]]  # the example checker's


@pytest.fixture(scope="module")
def server():
    yield from HASKELL.serve(langcase.missing(
        "run langs/haskell/install.sh",
        programs=("ghc", "gcc", "ld.lld"),
        paths=((REPO / "langs" / "haskell" / "boot" / "main.o", "langs/haskell/boot/main.o is not built"),),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = HASKELL.run(server, SOLUTION)
    assert body["stderr"] == ""  # no compiler chatter, no linker warning
    langcase.assert_a_plus_b(HASKELL, body, PAIRS, "")


def test_an_error_in_one_call_leaves_the_others(server):
    solution = "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b\n  | a == 3 = error \"three is not allowed\"\n  | otherwise = a `div` b\n"
    got = HASKELL.items(HASKELL.run(server, solution))
    assert [i["type"] for i in got] == ["result", "error", "result", "error"]
    assert got[0]["value"] == 0 and got[2]["value"] == -2
    assert got[1]["value"] == "three is not allowed"
    assert got[3]["value"] == "divide by zero"


def test_output_is_captured_per_call(server):
    solution = (
        "module Solution where\n\n"
        "import System.IO.Unsafe (unsafePerformIO)\n\n"
        "{-# NOINLINE solution #-}\n"
        "solution :: Int -> Int -> Int\n"
        "solution a b = unsafePerformIO $ do\n"
        '  putStrLn ("adding " ++ show a ++ " and " ++ show b ++ " \\233t\\233")\n'
        "  pure (a + b)\n"
    )
    got = HASKELL.items(HASKELL.run(server, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == langcase.additions(PAIRS, "adding {a} and {b} été\n")


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(server):
    body = HASKELL.run(server, "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b = a + \"b\"\n")
    langcase.assert_compile_error(body, "Solution.hs:4:", "error")


def test_a_checker_that_does_not_compile(server):
    body = HASKELL.run(server, SOLUTION, checker="module Main (main) where\nimport Solution (solution)\nmain :: IO ()\nmain = print (solution 1)\n")
    assert body["exit_code"] not in (0, None)
    assert "Checker.hs:4:" in body["stderr"]


def test_an_infinite_loop_times_out(server):
    solution = "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a _ = length (repeat a)\n"
    body = HASKELL.run(server, solution, timeout="2s")
    langcase.assert_timed_out(body)


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


def test_a_codebattle_style_checker_and_the_libraries_codebattle_lists(server):
    body = HASKELL.run(server, LIBRARIES_SOLUTION, checker=CODEBATTLE_STYLE_CHECKER)
    assert body["exit_code"] == 0, body
    assert [json.loads(line) for line in body["stdout"].splitlines()] == [
        {"status": "success", "result": 3, "expected": 3, "arguments": "[1, 2]"},
        {"status": "ok", "result": "__seed:42__"},
    ]


def test_a_checker_module_with_a_main(server):
    checker = CHECKER.replace("module Main (main) where", "module Checker (main) where")
    assert "module Checker (main) where" in checker
    assert [i["value"] for i in HASKELL.items(HASKELL.run(server, SOLUTION, checker=checker))] == [3, 7, 3, 0]


def test_two_runs_at_once_in_both_slots(server):
    """Each slot runs as its own uid: the workspace must build for any of them."""
    langcase.assert_four_runs_in_two_slots(HASKELL, server, SOLUTION, [3, 7, 3, 0])
