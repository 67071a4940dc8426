# frozen_string_literal: true

require_relative 'helper'
require 'tmpdir'
require 'open3'
require 'rbconfig'

# The quick starts of docs/ruby.md, as a user runs them: the gem built from
# the checkout and installed with `gem install --local` into a fresh
# directory, then each example run from another fresh directory against a
# private memcached, printing what the doc says it prints.
class TestQuickstart < Minitest::Test
  DOC = File.join(KuraTest::ROOT, 'docs', 'ruby.md')

  def block(marker)
    text = File.read(DOC)
    i = text.index("<!-- quickstart:#{marker} -->") or flunk("docs/ruby.md has no #{marker} quick start")
    code = text[i..][/```ruby\n(.*?)```/m, 1]
    out = text[i..][/```text\n(.*?)```/m, 1]
    [code, out]
  end

  def test_gem_installs_and_quick_starts_run
    addr, = KuraTest::Servers.memcached
    Dir.mktmpdir('kura-gem') do |dir|
      gem_home = File.join(dir, 'gems')
      out, st = Open3.capture2e('gem', 'build', 'kura.gemspec', '-o', File.join(dir, 'kura.gem'), chdir: File.join(KuraTest::ROOT, 'rb'))
      assert st.success?, out
      env = { 'GEM_HOME' => gem_home, 'GEM_PATH' => [gem_home, *Gem.path].join(':'), 'KURA_MEMCACHED' => addr, 'RUBYLIB' => nil, 'RUBYOPT' => nil }
      out, st = Open3.capture2e(env, 'gem', 'install', '--local', '--no-document', File.join(dir, 'kura.gem'), chdir: dir)
      assert st.success?, out
      out, st = Open3.capture2e(env, RbConfig.ruby, '-e', 'require "kura"; puts $LOADED_FEATURES.grep(%r{/kura\\.rb\\z})', chdir: dir)
      assert st.success?, out
      assert out.start_with?(gem_home), "kura loaded from #{out.inspect}, not the installed gem"
      %w[ruby rails].each do |which|
        code, want = block(which)
        app = File.join(dir, which)
        Dir.mkdir(app)
        File.write(File.join(app, 'main.rb'), code)
        out, err, st = Open3.capture3(env, RbConfig.ruby, 'main.rb', chdir: app)
        assert st.success?, "#{which}: #{err}"
        assert_equal want, out, "#{which} quick start output"
      end
    end
  end
end
