import java.lang.management.ManagementFactory

// What a judge's JVM gives: ONLINE_JUDGE set, both JIT tiers, a stack deep enough for a
// recursion of 100000 calls (a DFS on a path), where the JVM's default 1 MiB overflows.
fun depth(n: Int): Long = if (n == 0) 0 else 1 + depth(n - 1)

fun main() {
    var reached = -1L
    val deep = Thread(null, { reached = depth(100000) }, "deep", 0) // 0: the -Xss size
    deep.setUncaughtExceptionHandler { _, _ -> }
    deep.start()
    deep.join()
    val c2 = "-XX:TieredStopAtLevel=1" !in ManagementFactory.getRuntimeMXBean().inputArguments
    val judge = System.getProperty("ONLINE_JUDGE") != null
    println(if (reached == 100000L && c2 && judge) "judge-grade" else "not $reached $c2 $judge")
}
