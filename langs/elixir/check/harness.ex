defmodule KilnHarness do
  @moduledoc false
  # kiln's Elixir harness, harness mode (see harness.exs and ../README.md). install.sh compiles
  # this file into ../ebin, so a run only loads its .beam.
  #
  # run/1 returns only when asserts.json is not {"arguments": [[arg, ...], ...]} (plain mode: the
  # elixir CLI goes on with solution.exs) or when loading the solution defines no module with a
  # `solution` function (pass-through: the CLI goes on as after a plain run of the script).

  alias KilnHarness.JSON

  @solution "solution.exs"

  def run(data) do
    case parse(data) do
      {:ok, calls} -> harness(calls)
      :error -> :ok
    end
  end

  @doc false
  def parse(data) do
    data =
      case data do
        <<0xEF, 0xBB, 0xBF, rest::binary>> -> rest
        _ -> data
      end

    with true <- String.valid?(data),
         {:ok, %{"arguments" => calls}} when is_list(calls) <- JSON.decode(data),
         true <- Enum.all?(calls, &is_list/1) do
      {:ok, calls}
    else
      _ -> :error
    end
  end

  # kiln's HELD_STDOUT (kiln/runtime.py), below /sandbox
  @held "/sandbox/check/.kiln-held-stdout"

  defp harness(calls) do
    real = Process.group_leader()
    # Everything printed to the group leader (IO.puts, IO.write, processes spawned meanwhile)
    # goes to this device, read back per call; the report goes to the real standard output.
    {:ok, device} = StringIO.open("", capture_prompt: false, encoding: :unicode)
    # While the solution loads, the group leader is kiln's HELD_STDOUT instead, a file each print
    # is written to at once: a load ended abruptly (System.halt, a kill, the timeout, an OOM)
    # leaves what it printed there, and kiln-init passes it on as stdout. Once loaded, it is
    # read into the device and unlinked (unhold). Outside kiln's sandbox: the device alone.
    held =
      case File.open(@held, [:read, :write, :exclusive, encoding: :utf8]) do
        {:ok, file} -> file
        {:error, _} -> nil
      end

    Process.group_leader(self(), held || device)

    loaded =
      try do
        # As the CLI requires it: the CLI's own Code.require_file("solution.exs") is then a no-op.
        Code.require_file(@solution)
      catch
        kind, reason ->
          stack = __STACKTRACE__
          unhold(held, device)
          release(real, device)
          # uncaught as in a bare run: the CLI prints it (without this harness's frames), status 1
          :erlang.raise(kind, reason, prune(stack))
      end

    unhold(held, device)

    case pick(loaded || []) do
      nil ->
        release(real, device)

      module ->
        Process.flag(:trap_exit, true) # a linked process that dies does not end the harness
        items = calls(module, calls, device)
        Process.group_leader(self(), real)
        IO.write(["[", Enum.intersperse(items, ","), "]\n"])
        # nothing the solution left behind (processes, at_exit) may print or change the status
        System.halt(0)
    end
  end

  # The frames of the solution, down to the CLI's Code.require_file/2 (as a bare run shows them).
  defp prune(stack) do
    case Enum.find_index(stack, &match?({Code, :require_file, _, _}, &1)) do
      nil -> stack
      index -> Enum.take(stack, index + 1)
    end
  end

  # Loading is over: what it printed moves from the held file to the device, the file is
  # unlinked (kept open: a process loading spawned may still print to it), the device leads.
  defp unhold(nil, _device), do: :ok

  defp unhold(_held, device) do
    printed = File.read(@held)
    File.rm(@held)
    Process.group_leader(self(), device)

    case printed do
      {:ok, text} when text != "" -> IO.write(device, text)
      _ -> :ok
    end
  end

  # Loading was the whole run (or failed): its output goes out as it is.
  defp release(real, device) do
    Process.group_leader(self(), real)
    {_input, output} = StringIO.contents(device)
    StringIO.close(device)
    if output != "", do: IO.write(output)
  end

  # The solution's module: Solution (Codebattle's convention), else the first module the file
  # defines with a solution function.
  defp pick(loaded) do
    modules = for {module, _binary} <- loaded, do: module
    ordered = if Solution in modules, do: [Solution | List.delete(modules, Solution)], else: modules

    Enum.find(ordered, fn module ->
      Keyword.has_key?(module.__info__(:functions), :solution)
    end)
  end

  defp calls(module, calls, device) do
    loaded = take(device)
    first = if loaded == "", do: [], else: [[~s({"type":"output","value":), JSON.string(loaded), "}"]]

    items =
      Enum.map(calls, fn args ->
        start = :erlang.monotonic_time(:nanosecond)

        {type, text, elapsed} =
          try do
            apply(module, :solution, args)
          catch
            kind, reason ->
              elapsed = :erlang.monotonic_time(:nanosecond) - start
              {"error", JSON.string(message(kind, reason, __STACKTRACE__)), elapsed}
          else
            value ->
              elapsed = :erlang.monotonic_time(:nanosecond) - start
              {"result", JSON.value(value), elapsed}
          end

        output = JSON.string(take(device))
        [~s({"type":"), type, ~s(","value":), text, ~s(,"time":"), seconds(elapsed), ~s(","output":), output, "}"]
      end)

    first ++ items
  end

  defp take(device), do: StringIO.flush(device)

  defp seconds(ns), do: :erlang.float_to_binary(ns / 1.0e9, decimals: 7)

  defp message(kind, reason, stack) do
    case kind do
      :error ->
        exception = Exception.normalize(:error, reason, stack)
        name = inspect(exception.__struct__)

        text =
          try do
            Exception.message(exception)
          rescue
            _ -> "<exception message failed>"
          end

        if text == "", do: name, else: name <> ": " <> text

      :throw ->
        "throw: " <> inspect(reason)

      :exit ->
        "exit: " <> inspect(reason)
    end
  end
end

defmodule KilnHarness.JSON do
  @moduledoc false
  # A small JSON codec: Debian's Elixir comes without Jason, and OTP 25 has no json module.

  # ---- decoding: objects as maps with string keys (the last duplicate wins), integers exact

  def decode(text) do
    {value, rest} = datum(ws(text))

    case ws(rest) do
      "" -> {:ok, value}
      _ -> :error
    end
  catch
    :throw, :invalid -> :error
  end

  defp ws(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: ws(rest)
  defp ws(rest), do: rest

  defp datum(<<?{, rest::binary>>) do
    case ws(rest) do
      <<?}, rest::binary>> -> {%{}, rest}
      rest -> members(rest, [])
    end
  end

  defp datum(<<?[, rest::binary>>) do
    case ws(rest) do
      <<?], rest::binary>> -> {[], rest}
      rest -> elements(rest, [])
    end
  end

  defp datum(<<?", rest::binary>>), do: string(rest, [])
  defp datum(<<"true", rest::binary>>), do: {true, rest}
  defp datum(<<"false", rest::binary>>), do: {false, rest}
  defp datum(<<"null", rest::binary>>), do: {nil, rest}
  defp datum(<<c, _::binary>> = text) when c == ?- or c in ?0..?9, do: number(text)
  defp datum(_), do: throw(:invalid)

  defp elements(text, acc) do
    {item, rest} = datum(text)

    case ws(rest) do
      <<?,, rest::binary>> -> elements(ws(rest), [item | acc])
      <<?], rest::binary>> -> {:lists.reverse(acc, [item]), rest}
      _ -> throw(:invalid)
    end
  end

  defp members(<<?", rest::binary>>, acc) do
    {key, rest} = string(rest, [])

    case ws(rest) do
      <<?:, rest::binary>> ->
        {item, rest} = datum(ws(rest))
        acc = [{key, item} | acc]

        case ws(rest) do
          <<?,, rest::binary>> -> members(ws(rest), acc)
          <<?}, rest::binary>> -> {Map.new(:lists.reverse(acc)), rest}
          _ -> throw(:invalid)
        end

      _ ->
        throw(:invalid)
    end
  end

  defp members(_, _), do: throw(:invalid)

  defp string(text, acc) do
    case :binary.match(text, ["\"", "\\"]) do
      {at, 1} ->
        <<chunk::binary-size(at), c, rest::binary>> = text
        acc = [acc | chunk]
        if c == ?", do: {IO.iodata_to_binary(acc), rest}, else: escape(rest, acc)

      :nomatch ->
        throw(:invalid)
    end
  end

  defp escape(<<c, rest::binary>>, acc) when c in [?", ?\\, ?/], do: string(rest, [acc, c])
  defp escape(<<?b, rest::binary>>, acc), do: string(rest, [acc, ?\b])
  defp escape(<<?f, rest::binary>>, acc), do: string(rest, [acc, ?\f])
  defp escape(<<?n, rest::binary>>, acc), do: string(rest, [acc, ?\n])
  defp escape(<<?r, rest::binary>>, acc), do: string(rest, [acc, ?\r])
  defp escape(<<?t, rest::binary>>, acc), do: string(rest, [acc, ?\t])

  defp escape(<<?u, hex::binary-size(4), rest::binary>>, acc) do
    code = hex(hex)

    cond do
      code in 0xD800..0xDBFF ->
        case rest do
          <<"\\u", low::binary-size(4), after_low::binary>> ->
            low = hex(low)

            if low in 0xDC00..0xDFFF do
              string(after_low, [acc, <<0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00)::utf8>>])
            else
              string(rest, [acc, "\uFFFD"])
            end

          _ ->
            string(rest, [acc, "\uFFFD"])
        end

      code in 0xDC00..0xDFFF ->
        string(rest, [acc, "\uFFFD"])

      true ->
        string(rest, [acc, <<code::utf8>>])
    end
  end

  defp escape(_, _), do: throw(:invalid)

  defp hex(digits) do
    case Integer.parse(digits, 16) do
      {code, ""} -> code
      _ -> throw(:invalid)
    end
  end

  defp number(text) do
    rest =
      case text do
        <<?-, rest::binary>> -> int_digits(rest)
        _ -> int_digits(text)
      end

    {frac, rest} = fraction(rest)
    {exp, rest} = exponent(rest)
    size = byte_size(text) - byte_size(rest)
    <<literal::binary-size(size), _::binary>> = text

    if frac == 0 and exp == 0 do
      {String.to_integer(literal), rest}
    else
      case Float.parse(literal) do
        {float, ""} -> {float, rest}
        _ -> throw(:invalid)
      end
    end
  rescue
    ArgumentError -> throw(:invalid)
  end

  defp int_digits(<<?0, rest::binary>>), do: rest
  defp int_digits(<<c, _::binary>> = text) when c in ?1..?9, do: skip_digits(text)
  defp int_digits(_), do: throw(:invalid)

  defp fraction(<<?., c, _::binary>> = text) when c in ?0..?9 do
    <<?., rest::binary>> = text
    {1, skip_digits(rest)}
  end

  defp fraction(<<?., _::binary>>), do: throw(:invalid)
  defp fraction(rest), do: {0, rest}

  defp exponent(<<e, rest::binary>>) when e in [?e, ?E] do
    rest =
      case rest do
        <<s, more::binary>> when s in [?+, ?-] -> more
        _ -> rest
      end

    case rest do
      <<c, _::binary>> when c in ?0..?9 -> {1, skip_digits(rest)}
      _ -> throw(:invalid)
    end
  end

  defp exponent(rest), do: {0, rest}

  defp skip_digits(<<c, rest::binary>>) when c in ?0..?9, do: skip_digits(rest)
  defp skip_digits(rest), do: rest

  # ---- encoding: any term as JSON text (iodata); never raises

  def value(term) do
    try do
      encode(term)
    rescue
      _ -> string(inspect(term))
    catch
      _, _ -> string(inspect(term))
    end
  end

  defp encode(nil), do: "null"
  defp encode(true), do: "true"
  defp encode(false), do: "false"
  defp encode(atom) when is_atom(atom), do: string(Atom.to_string(atom))
  defp encode(int) when is_integer(int), do: Integer.to_string(int)
  defp encode(float) when is_float(float), do: :erlang.float_to_binary(float, [:short])
  defp encode(bin) when is_binary(bin), do: string(bin)
  defp encode(list) when is_list(list), do: list(list)
  defp encode(tuple) when is_tuple(tuple), do: list(Tuple.to_list(tuple))
  defp encode(%MapSet{} = set), do: set |> MapSet.to_list() |> Enum.sort() |> list()
  defp encode(%Range{} = range), do: list(Enum.to_list(range))

  defp encode(%_{} = struct) do
    if String.Chars.impl_for(struct) != nil do
      string(to_string(struct))
    else
      struct |> Map.from_struct() |> encode()
    end
  end

  defp encode(map) when is_map(map) do
    pairs = for {k, v} <- map, do: [string(key(k)), ?:, encode(v)]
    [?{, Enum.intersperse(pairs, ?,), ?}]
  end

  defp encode(other), do: string(inspect(other))

  defp list(list) do
    if proper?(list) do
      [?[, Enum.intersperse(Enum.map(list, &encode/1), ?,), ?]]
    else
      string(inspect(list))
    end
  end

  defp proper?([]), do: true
  defp proper?([_ | tail]), do: proper?(tail)
  defp proper?(_), do: false

  defp key(k) when is_binary(k), do: k
  defp key(k) when is_atom(k) or is_number(k), do: to_string(k)
  defp key(k), do: inspect(k)

  # A JSON string (iodata) of bin: UTF-8 as is, invalid bytes as U+FFFD.
  def string(bin) do
    bin = utf8(bin)
    [?", escape_string(bin, :binary.matches(bin, pattern()), 0), ?"]
  end

  defp escape_string(bin, [], from), do: binary_part(bin, from, byte_size(bin) - from)

  defp escape_string(bin, [{at, 1} | more], from) do
    <<c>> = binary_part(bin, at, 1)
    [binary_part(bin, from, at - from), escaped(c) | escape_string(bin, more, at + 1)]
  end

  defp escaped(?"), do: "\\\""
  defp escaped(?\\), do: "\\\\"
  defp escaped(?\n), do: "\\n"
  defp escaped(?\r), do: "\\r"
  defp escaped(?\t), do: "\\t"
  defp escaped(?\b), do: "\\b"
  defp escaped(?\f), do: "\\f"
  defp escaped(c), do: "\\u00" <> Base.encode16(<<c>>)

  defp pattern do
    case Process.get(:kiln_json_escape) do
      nil ->
        compiled = :binary.compile_pattern(["\"", "\\" | for(c <- 0..31, do: <<c>>)])
        Process.put(:kiln_json_escape, compiled)
        compiled

      compiled ->
        compiled
    end
  end

  defp utf8(bin) do
    if String.valid?(bin) do
      bin
    else
      bin
      |> String.chunk(:valid)
      |> Enum.map(fn chunk -> if String.valid?(chunk), do: chunk, else: "\uFFFD" end)
      |> IO.iodata_to_binary()
    end
  end
end
