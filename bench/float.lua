-- Lua 5.4 (and LuaJIT -joff) baseline for examples/float.hasm: n steps of
-- x = x * 1.0000001 + 0.5 from x = 0.0, in floats.
--   usage: lua5.4 float.lua N    prints x
local function float_chain(n)
  local x = 0.0
  for _ = 1, n do
    x = x * 1.0000001 + 0.5
  end
  return x
end

-- Print x like `hali run` prints an f64: the shortest %g form that reads
-- back as the same number.
local function shortest(v)
  local s
  for prec = 1, 17 do
    s = string.format("%." .. prec .. "g", v)
    if tonumber(s) == v then break end
  end
  return s
end

-- LuaJIT (5.1) has no math.tointeger: its numbers are doubles, exact here.
local n = tonumber(arg[1])
if n and math.tointeger then n = math.tointeger(n) end
if not n then error("usage: float.lua N") end
print(shortest(float_chain(n)))
