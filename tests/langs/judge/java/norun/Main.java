// A class without a main method: javac builds it, nothing can run it.
public class Main {
    static long add(long a, long b) { return a + b; }
}
