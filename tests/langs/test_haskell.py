"""haskell through the real HTTP API and the real sandbox: GHC compiles the client's Checker.hs
with Solution.hs (langs/haskell), the client harness prints the harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import json

import langcase

pytestmark = langcase.only("haskell")
HASKELL = langcase.LANGS["haskell"]


def test_a_client_harness_that_does_not_compile(lang_server):
    body = HASKELL.run(lang_server, HASKELL.solution, client_harness="module Main (main) where\nimport Solution (solution)\nmain :: IO ()\nmain = print (solution 1)\n")
    assert body["exit_code"] not in (0, None)
    assert "Checker.hs:4:" in body["stderr"]


# the client harness Codebattle generates for Haskell (its checker): `module Checker where`, aeson objects printed one per
# line, and its entry point named `test` (no `main`); its solution template imports
# Data.HashMap.Lazy and lists the packages a solution may use.
CODEBATTLE_STYLE_HARNESS = """{-# LANGUAGE ScopedTypeVariables #-}
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


def test_a_codebattle_style_client_harness_and_the_libraries_codebattle_lists(lang_server):
    body = HASKELL.run(lang_server, LIBRARIES_SOLUTION, client_harness=CODEBATTLE_STYLE_HARNESS)
    assert body["exit_code"] == 0, body
    assert [json.loads(line) for line in body["stdout"].splitlines()] == [
        {"status": "success", "result": 3, "expected": 3, "arguments": "[1, 2]"},
        {"status": "ok", "result": "__seed:42__"},
    ]


def test_a_client_harness_in_module_checker_with_a_main(lang_server):
    client_harness = HASKELL.client_harness.replace("module Main (main) where", "module Checker (main) where")
    assert "module Checker (main) where" in client_harness
    assert [i["value"] for i in HASKELL.items(HASKELL.run(lang_server, HASKELL.solution, client_harness=client_harness))] == [3, 7, 3, 0]


def test_the_compilers_heap_options_stay_the_compilers(lang_server):
    # `ghc ... +RTS -A128m -RTS` sizes GHC's own allocation area; the client harness runs with the RTS's
    # defaults (1 MB: 256 blocks of 4 KB) and nothing about RTS options on stderr
    client_harness = "module Main (main) where\nimport GHC.RTS.Flags\nimport Solution (solution)\nmain :: IO ()\nmain = do\n  flags <- getGCFlags\n  print (minAllocAreaSize flags, solution 1 2)\n"
    body = HASKELL.run(lang_server, HASKELL.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "(256,3)\n", ""), body


def test_a_type_error_is_ghcs_message_and_status(lang_server):
    solution = "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b = a + show b\n"
    body = HASKELL.run(lang_server, solution)
    assert (body["exit_code"], body["stdout"]) == (1, ""), body
    assert body["stderr"].startswith("\ncheck/Solution.hs:4:20: error:\n    • Couldn't match type ‘[Char]’ with ‘Int’"), body["stderr"]


def test_a_link_error_is_lld_s_message_and_ghcs_status(lang_server):
    # boot/ld links with LLD: its message, GHC's phase and status (mold, tried for issue 19, words
    # it differently: bench/history/compiled.md)
    solution = 'module Solution where\n\nforeign import ccall "kiln_nowhere" nowhere :: Int -> Int\n\nsolution :: Int -> Int -> Int\nsolution a b = nowhere a + b\n'
    client_harness = "module Main (main) where\nimport Solution (solution)\nmain :: IO ()\nmain = print (solution 1 2)\n"
    body = HASKELL.run(lang_server, solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (1, ""), body
    assert body["stderr"].startswith("ld.lld: error: undefined symbol: kiln_nowhere\n"), body["stderr"]
    assert body["stderr"].endswith("collect2: error: ld returned 1 exit status\n`ld' failed in phase `Linker'. (Exit code: 1)\n"), body["stderr"]
