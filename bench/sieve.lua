-- Lua 5.4 (and LuaJIT -joff) baseline for examples/sieve.hasm: the number of primes below n,
-- by the sieve of Eratosthenes over a table of booleans (filled with false
-- first, so it is one array; hali's buffer starts zeroed too).
--   usage: lua5.4 sieve.lua N     prints the count
local function sieve(n)
  local composite = {}
  for i = 1, n - 1 do composite[i] = false end
  local count = 0
  for i = 2, n - 1 do
    if not composite[i] then
      count = count + 1
      for j = i * i, n - 1, i do composite[j] = true end
    end
  end
  return count
end

-- LuaJIT (5.1) has no math.tointeger: its numbers are doubles, exact here.
local n = tonumber(arg[1])
if n and math.tointeger then n = math.tointeger(n) end
if not n then error("usage: sieve.lua N") end
print(sieve(n))
