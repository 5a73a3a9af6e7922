-- ardour7-lua setup_routing.lua <session_dir> <session_name> <plugin_type> <plugin_name> <n_out> [<export_dir> <export_name> <preset_uuid>]
--   plugin_type: VST3 | LV2 | Lua | none
--   n_out: number of plugin output channels to expose (0 = plugin's natural output count)
-- Loads the session, checks the region, inserts the plugin on track "Mix" (strict I/O off,
-- custom output configuration), gives the track and the master bus n_out channels, connects
-- track out k -> master in k (master outs feed the multi-channel export), saves.
local dir, name, ptype, pname, n_out = arg[1], arg[2], arg[3], arg[4], tonumber(arg[5] or "0")
local function say(k, v) print("@@ " .. k .. "=" .. tostring(v)) end
local A = ARDOUR.DataType("audio")

assert(AudioEngine:set_backend("None (Dummy)", "", ""), "cannot select Dummy backend")
local s = load_session(dir, name)
assert(s, "load_session failed")

local t = Session:route_by_name("Mix")
assert(not t:isnil(), "no track Mix")
local tr = t:to_track()
local pl = tr:playlist()
say("regions", pl:n_regions())
for r in pl:region_list():iter() do
	say("region", r:name() .. " pos=" .. r:position():samples() .. " len=" .. r:length():samples() .. " ch=" .. r:to_audioregion():n_channels())
end
local loc = Session:locations():session_range_location()
if loc then say("session_range", loc:start():samples() .. "-" .. loc:_end():samples()) end

if ptype ~= "none" then
	local proc
	if ptype == "Lua" then
		proc = ARDOUR.LuaAPI.new_luaproc(Session, pname)
	else
		proc = ARDOUR.LuaAPI.new_plugin(Session, pname, ARDOUR.PluginType[ptype], "")
	end
	if proc:isnil() then
		say("error", "plugin not found: " .. ptype .. " '" .. pname .. "'")
		print("@@ available:")
		for p in ARDOUR.LuaAPI.list_plugins():iter() do
			print("@@ plugin=" .. p.name .. " | " .. p.unique_id .. " | type " .. tostring(p.type) .. " | in " .. p.n_inputs:n_audio() .. " out " .. p.n_outputs:n_audio())
		end
		close_session()
		os.exit(3)
	end
	-- strict I/O must be off *before* inserting: with strict I/O the plugin's outputs are cut to
	-- the track's input count (2) and aux outputs stay unmapped even with a custom config.
	assert(t:set_strict_io(false), "set_strict_io(false) failed")
	assert(t:add_processor_by_index(proc, 0, nil, true) == 0, "add_processor failed")
	local pi = proc:to_insert()
	local plug = pi:plugin(0)
	say("plugin", plug:name() .. " | " .. plug:unique_id())
	say("natural_in", pi:natural_input_streams():n_audio())
	say("natural_out", pi:natural_output_streams():n_audio())
	for i = 0, pi:natural_output_streams():n_audio() - 1 do
		local d = plug:describe_io_port(A, false, i)
		say("out_port", i .. " | " .. d.name .. " | group=" .. d.group_name .. " | gch=" .. d.group_channel)
	end
	say("latency", proc:signal_latency())
	if n_out == 0 then n_out = pi:natural_output_streams():n_audio() end
	-- custom output configuration: exactly n_out plugin outputs (main + aux, in bus order)
	local ok = t:customize_plugin_insert(proc, 1, ARDOUR.ChanCount(A, n_out), ARDOUR.ChanCount(A, 2))
	say("customize", ok)
	-- make the output pin map the identity (plugin out k -> route buffer k); a previous custom
	-- config can leave outputs unmapped.
	local om = pi:output_map(0)
	local identity = true
	for c = 0, n_out - 1 do if om:get(A, c) ~= c then identity = false end end
	if not identity then
		local cm = ARDOUR.ChanMapping()
		for c = 0, n_out - 1 do cm:set(A, c, c) end
		pi:set_output_map(0, cm)
	end
	say("plugin_out_streams", proc:output_streams():n_audio())
	om = pi:output_map(0)
	local m = {}
	for c = 0, n_out - 1 do m[#m + 1] = tostring(om:get(A, c)) end
	say("output_map", table.concat(m, ","))
else
	if n_out == 0 then n_out = 2 end
end

-- track outputs: Ardour grows them to the processor output count when strict I/O is off
while t:n_outputs():n_audio() < n_out do t:output():add_port("", nil, A) end
-- surplus ports (from an earlier, larger config) would carry copies of the last channel
while t:n_outputs():n_audio() > n_out do
	t:output():remove_port(t:output():audio(t:n_outputs():n_audio() - 1), nil)
end
say("track_outputs", t:n_outputs():n_audio())
say("channels", n_out)

local master = Session:master_out()
while master:n_inputs():n_audio() < n_out do master:input():add_port("", nil, A) end
while master:n_outputs():n_audio() < n_out do master:output():add_port("", nil, A) end
say("master_io", master:n_inputs():n_audio() .. "/" .. master:n_outputs():n_audio())

t:output():disconnect_all(nil)
master:input():disconnect_all(nil)
for c = 0, n_out - 1 do
	local rc = t:output():connect(t:output():audio(c), master:input():audio(c):name(), nil)
	assert(rc == 0, "connect failed for channel " .. c)
end
-- N in -> N out would get a VBAP panner (it mixes channels): bypass panning on track and master
-- so the main-outs delivery copies channel k to output port k.
t:panner_shell():set_bypassed(true)
master:panner_shell():set_bypassed(true)
say("panners_bypassed", tostring(t:panner_shell():bypassed()) .. "/" .. tostring(master:panner_shell():bypassed()))
say("connected", n_out)
Session:save_state("")
local exp_dir, exp_name, preset = arg[6], arg[7], arg[8]
if exp_dir and exp_dir ~= "" then
	-- in-process export of the master bus (all its channels), same as ardour7-export does
	local e = Session:simple_export()
	say("export_preset", e:set_preset(preset))
	e:set_folder(exp_dir)
	e:set_name(exp_name)
	say("export_outputs", e:check_outputs())
	local t0 = ARDOUR.LuaAPI.monotonic_time()
	local ok = e:run_export()
	say("export_ok", ok)
	say("export_us", ARDOUR.LuaAPI.monotonic_time() - t0)
end
close_session()
print("@@ done")
