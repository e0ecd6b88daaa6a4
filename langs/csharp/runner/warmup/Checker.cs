using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using Newtonsoft.Json;

// kiln's warm-up checker (runner/Run.cs --prestarted): compiled and run once, output discarded,
// before the request comes. In the shape of a checker (the example's): console capture per
// call, a stopwatch, a list of dictionaries through Newtonsoft.Json.
namespace KilnWarmup
{
    public class Checker
    {
        public static void Main(string[] args)
        {
            var pairs = new[] { Tuple.Create(1, 2), Tuple.Create(10, 20) };
            var stdout = Console.Out;
            var instance = new Solution();
            var items = new List<Dictionary<string, object>>();
            foreach (var pair in pairs)
            {
                var captured = new StringWriter();
                Console.SetOut(captured);
                var item = new Dictionary<string, object>();
                var watch = Stopwatch.StartNew();
                try
                {
                    object value = instance.solution(pair.Item1, pair.Item2);
                    item["type"] = "result";
                    item["value"] = value;
                }
                catch (Exception e)
                {
                    item["type"] = "error";
                    item["value"] = e.Message;
                }
                watch.Stop();
                item["time"] = watch.Elapsed.TotalSeconds.ToString("F7", CultureInfo.InvariantCulture);
                item["output"] = captured.ToString();
                items.Add(item);
            }
            Console.SetOut(stdout);
            var text = JsonConvert.SerializeObject(items);
            var back = JsonConvert.DeserializeObject<List<Dictionary<string, object>>>(text);
            Console.WriteLine(back.Count(item => (string) item["type"] == "result"));
        }
    }
}
