main :: IO ()
main = do
  [a, b] <- map read . words <$> getContents
  print (a + b :: Integer)
