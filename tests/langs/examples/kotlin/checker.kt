package solution

import java.io.ByteArrayOutputStream
import java.io.PrintStream
import java.util.Locale
import com.google.gson.GsonBuilder

// An example checker for kiln's kotlin workspace: calls solution(a, b) for each pair and prints
// DESIGN.md's protocol, one JSON array of {"type", "value", "time", "output"} items, with gson.
fun main() {
    val pairs = listOf(1 to 2, 10 to 20, -5 to 5)
    val stdout = System.out
    val captured = ByteArrayOutputStream()
    System.setOut(PrintStream(captured, true, "UTF-8"))
    val items = mutableListOf<Map<String, Any?>>()
    for ((a, b) in pairs) {
        val item = linkedMapOf<String, Any?>()
        val start = System.nanoTime()
        try {
            val value = solution(a, b)
            item["type"] = "result"
            item["value"] = value
        } catch (e: Exception) {
            item["type"] = "error"
            item["value"] = e.toString()
        }
        item["time"] = String.format(Locale.ROOT, "%.7f", (System.nanoTime() - start) / 1e9)
        System.out.flush()
        item["output"] = captured.toString("UTF-8")
        captured.reset()
        items.add(item)
    }
    System.setOut(stdout)
    println(GsonBuilder().disableHtmlEscaping().serializeNulls().create().toJson(items))
}
