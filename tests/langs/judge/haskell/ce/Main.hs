main :: IO ()
main = do
  [a, b] <- map read . words <$> getContents
  putStrLn (a + b :: Integer)
