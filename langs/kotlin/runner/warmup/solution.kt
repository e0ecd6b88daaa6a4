package solution

// Install-time warm-up only (see ../../Makefile `prepare`): typical solution code, so that the
// compiler paths and library classes it touches land in the class data sharing archive.
fun solution(a: Int, b: Int, text: String, ratio: Double, flag: Boolean, names: Map<String, String>, words: List<String>): List<Int> {
    println("sum of $a and $b")
    val counts = words.groupingBy { it }.eachCount()
    val result = counts.values.sorted().toMutableList()
    val joined = words.map { it.uppercase() }.filter { it.isNotEmpty() }.joinToString(",")
    val sorted = (1..10).map { it * a % 7 }.sortedDescending()
    val letters = text.lowercase().toSortedSet()
    val queue = ArrayDeque(listOf(a, b))
    var big = 0L
    for (i in sorted.indices) {
        big += if (i % 2 == 0) sorted[i].toLong() else (ratio * 10).toLong()
    }
    val pair = Pair(joined.reversed(), letters.size)
    val (first, second) = pair
    result.add(a + b + queue.size + second + first.length + big.toInt() + (if (flag) 1 else 0) + names.size)
    return result
}
