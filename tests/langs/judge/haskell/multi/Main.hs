import Adder (add)

main :: IO ()
main = do
  [a, b] <- map read . words <$> getContents
  print (add a b)
