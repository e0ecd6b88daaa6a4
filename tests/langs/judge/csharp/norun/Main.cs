// No Main method.
public class Adder {
    public static long Add(long a, long b) { return a + b; }
}
