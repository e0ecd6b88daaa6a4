{-# LANGUAGE CPP #-}
-- What a judge's build gives: ONLINE_JUDGE defined (DOMjudge's -cpp -DONLINE_JUDGE), optimized
-- (-O: this lazy foldl runs as a strict loop).
main :: IO ()
main = do
  n <- readLn :: IO Int
  let total = foldl (+) 0 [1 .. n]
#ifdef ONLINE_JUDGE
  putStrLn (show total ++ " judge-grade")
#else
  putStrLn (show total ++ " debug")
#endif
