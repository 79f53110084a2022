-- Lua 5.4 (and LuaJIT -joff) baseline for examples/loop.hasm: sum over i in [0, n) of
-- (i mod 7)^2, in integer arithmetic (i, m and sum stay Lua integers).
--   usage: lua5.4 loop.lua N     prints the sum
local function loop(n)
  local sum = 0
  for i = 0, n - 1 do
    local m = i % 7
    sum = sum + m * m
  end
  return sum
end

-- LuaJIT (5.1) has no math.tointeger: its numbers are doubles, exact here.
local n = tonumber(arg[1])
if n and math.tointeger then n = math.tointeger(n) end
if not n then error("usage: loop.lua N") end
print(loop(n))
