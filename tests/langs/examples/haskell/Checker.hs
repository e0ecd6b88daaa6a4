{-# LANGUAGE OverloadedStrings #-}
-- An example kiln checker for Haskell. kiln writes it to check/Checker.hs next to the client's
-- check/Solution.hs (`module Solution where`), compiles both with GHC and runs it.
--
-- It calls `solution a b` for each pair below and prints the harness protocol, one JSON array:
--   [{"type":"result","value":3,"time":"0.0000123","output":""}, ...]
-- A call that throws (error, pattern-match failure, division by zero) is an item
-- {"type":"error","value":"<first line of the exception>",...} and the other calls still run.
-- What a call prints on stdout (e.g. through unsafePerformIO) is captured per call.
--
-- It only needs base, aeson, bytestring, deepseq, directory and text, all on kiln's compile path.
module Main (main) where

import Control.DeepSeq (NFData, force)
import Control.Exception (SomeException, displayException, evaluate, try)
import Data.Aeson ((.=))
import qualified Data.Aeson as A
import qualified Data.Aeson.Encoding as E
import qualified Data.ByteString as B
import qualified Data.ByteString.Lazy.Char8 as BL
import qualified Data.Text as T
import qualified Data.Text.Encoding as TE
import Data.Text.Encoding.Error (lenientDecode)
import GHC.Clock (getMonotonicTimeNSec)
import GHC.IO.Handle (hDuplicate, hDuplicateTo)
import System.Directory (removeFile)
import System.IO
import Text.Printf (printf)

import Solution (solution)

cases :: [(Int, Int)]
cases = [(1, 2), (3, 4), (10, -7), (0, 0)]

main :: IO ()
main = do
  items <- mapM (\(a, b) -> call (solution a b)) cases
  BL.putStrLn (E.encodingToLazyByteString (E.list id items))

-- | Evaluates one result fully, with stdout redirected to a temporary file, and returns the
-- call's protocol item.
call :: (A.ToJSON a, NFData a) => a -> IO A.Encoding
call result = do
  (path, sink) <- openTempFile "/tmp" "call.out"
  hSetEncoding sink utf8
  hFlush stdout
  saved <- hDuplicate stdout
  hDuplicateTo sink stdout
  start <- getMonotonicTimeNSec
  outcome <- try (evaluate (force result))
  end <- getMonotonicTimeNSec
  hFlush stdout
  hDuplicateTo saved stdout
  hClose saved
  hClose sink
  printed <- B.readFile path
  removeFile path
  let seconds = printf "%.7f" (fromIntegral (end - start) / 1e9 :: Double) :: String
      output = TE.decodeUtf8With lenientDecode printed
      item kind value = A.pairs ("type" .= (kind :: T.Text) <> value <> "time" .= seconds <> "output" .= output)
  pure $ case outcome of
    Right value -> item "result" ("value" .= value)
    Left err -> item "error" ("value" .= takeWhile (/= '\n') (displayException (err :: SomeException)))
