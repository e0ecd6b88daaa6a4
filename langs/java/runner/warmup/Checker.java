package solution;

import java.io.*;
import java.util.*;
import static java.util.Map.entry;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;

// Install-time warm-up only (see ../../Makefile `prepare`): a checker shaped like those Codebattle
// generates (gson, captured System.out, nanoTime, String.format), plus the error path.
public class Checker {
    public static void main(String... args) {
        PrintStream realOut = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true));
        List<Object> items = new ArrayList<>();
        Solution instance = new Solution();
        Map<String, String> names = Map.ofEntries(entry("a", "b"), entry("c", "d"));
        Object[][] cases = {{1, 2}, {3, null}};
        for (Object[] c : cases) {
            long start = System.nanoTime();
            try {
                Object value = instance.solution((Integer) c[0], (Integer) c[1], "Hello", 0.5, true, names, Arrays.asList("x", "yy", "x"));
                items.add(new Item("result", value, String.format("%.7f", (System.nanoTime() - start) / 1_000_000_000.0), captured.toString()));
            } catch (Exception e) {
                items.add(new Item("error", e.toString(), String.format("%.7f", (System.nanoTime() - start) / 1_000_000_000.0), captured.toString()));
            }
            captured.reset();
        }
        System.setOut(realOut);
        Gson gson = new GsonBuilder().disableHtmlEscaping().serializeNulls().create();
        System.out.println(gson.toJson(items));
        items.forEach(item -> System.out.println(new Gson().toJson(item)));
    }
}

class Item {
    private final String type;
    private final Object value;
    private final String time;
    private final String output;

    Item(String type, Object value, String time, String output) {
        this.type = type;
        this.value = value;
        this.time = time;
        this.output = output;
    }
}
