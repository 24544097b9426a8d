# SPDX-License-Identifier: Apache-2.0
#
# Homebrew formula: this repository is its own tap.
#   brew tap macake/macake https://github.com/macake/macake
#   brew install --HEAD macake
# There is no release to pin yet, so only --HEAD installs: the main
# branch, built with Go.
class Macake < Formula
  desc "Latency-driven adaptive bandwidth shaping (pf + dummynet, tc)"
  homepage "https://github.com/macake/macake"
  license "Apache-2.0"
  head "https://github.com/macake/macake.git", branch: "main"

  depends_on "go" => :build

  def install
    # The Makefile's build: static, -trimpath, the version from git.
    system "make", "build", "man", "completions", "GO=#{Formula["go"].opt_bin}/go"
    bin.install "bin/macake"
    man1.install "bin/man/macake.1"
    bash_completion.install "bin/completions/macake.bash" => "macake"
    zsh_completion.install "bin/completions/_macake"
    fish_completion.install "bin/completions/macake.fish"
    (pkgshare/"examples").install Dir["examples/links.d/*.toml"]
  end

  def caveats
    <<~EOS
      macake's daemon runs as root under launchd, so the binary it runs must
      be one that only root can replace; #{HOMEBREW_PREFIX}/bin is yours.
      Copy it to a root-owned place and install the daemon from there:
        sudo install -m 0755 #{opt_bin}/macake /usr/local/bin/macake
        sudo /usr/local/bin/macake init home --download 250mbit --upload 20mbit
        sudo /usr/local/bin/macake install-daemon --binary /usr/local/bin/macake
      Check the Mac first (ten seconds, scratch objects only):
        sudo macake selftest
      Example policies: #{opt_pkgshare}/examples
    EOS
  end

  test do
    assert_match "macake", shell_output("#{bin}/macake version")
    (testpath/"links.d").mkpath
    cp Dir[pkgshare/"examples/*.toml"], testpath/"links.d"
    chmod 0644, Dir[testpath/"links.d/*.toml"]
    system bin/"macake", "validate", "--config-dir", testpath/"links.d"
  end
end
