import java.lang.management.ManagementFactory;

// What a judge's JVM gives: ONLINE_JUDGE set, both JIT tiers, a stack deep enough for a
// recursion of 100000 calls (a DFS on a path), where the JVM's default 1 MiB overflows.
public class Main {
    static long depth(int n) {
        return n == 0 ? 0 : 1 + depth(n - 1);
    }

    public static void main(String[] args) throws Exception {
        long[] reached = {-1};
        Thread.UncaughtExceptionHandler quiet = (t, e) -> {};
        Thread deep = new Thread(null, () -> reached[0] = depth(100000), "deep", 0);  // 0: the -Xss size
        deep.setUncaughtExceptionHandler(quiet);
        deep.start();
        deep.join();
        boolean c2 = !ManagementFactory.getRuntimeMXBean().getInputArguments().contains("-XX:TieredStopAtLevel=1");
        boolean judge = System.getProperty("ONLINE_JUDGE") != null;
        System.out.println(reached[0] == 100000 && c2 && judge ? "judge-grade" : "not " + reached[0] + " " + c2 + " " + judge);
    }
}
