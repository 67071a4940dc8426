# frozen_string_literal: true

# The field report's user-item row (~300 B as kura stores it): 15 fields,
# ids, levels, flags, two times and a note.
def record(i)
  { 'id' => 1_000_000 + i, 'user_id' => 42, 'item_id' => 30_000 + (i % 997), 'level' => (i % 99) + 1,
    'exp' => i * 137, 'luck' => i % 7, 'plus_hp' => i % 50, 'plus_atk' => i % 40, 'plus_spd' => i % 30,
    'locked' => i.odd?, 'favorite' => (i % 5).zero?, 'skill_level' => (i % 10) + 1,
    'created_at' => Time.at(1_700_000_000 + i).utc, 'updated_at' => Time.at(1_790_000_000 + i).utc,
    'note' => "monster #{i} acquired in event #{i % 17}" }
end
