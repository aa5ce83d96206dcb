#!/usr/bin/perl
# Stage 2 of a test guest, PID 1 after switch_root into the host's root (see init): runs
# guest.sh with the arguments listed in $LWK_ARGV (one a line), reaps every orphan meanwhile
# (tests check that killed processes are gone, and an unreaped zombie still looks alive), then
# writes "LWK-STATUS <guest.sh's status>" on the console and on the results port (the second
# serial port) and powers the guest off. qemu's own exit status says nothing.
use strict;
use warnings;

my $results = '/dev/ttyS1';
my $project = $ENV{LWK_PROJECT} // '';
my $argv    = $ENV{LWK_ARGV}    // '';

sub finish {
    my ($status) = @_;
    print "LWK-STATUS $status\n";
    if (open(my $fh, '>', $results)) {
        print $fh "LWK-STATUS $status\n";
        close $fh;
    }
    syscall(162);    # sync
    # reboot(LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_POWER_OFF)
    syscall(169, 0xfee1dead, 672274793, 0x4321fedc);
    sleep 10;
    exit 1;
}

open(my $fh, '<', $argv) or do { print "pid1: cannot read $argv: $!\n"; finish('pid1-args') };
chomp(my @args = <$fh>);
close $fh;

my $pid = fork();
finish('pid1-fork') unless defined $pid;
if ($pid == 0) {
    %ENV = (
        PATH        => '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        HOME        => '/root',
        LANG        => 'C.UTF-8',
        TERM        => 'dumb',
        LWK_RESULTS => $results,
    );
    open(STDIN, '<', '/dev/null');
    exec('/bin/bash', "$project/tests/kernels/guest.sh", @args) or print "pid1: exec bash: $!\n";
    exit 127;
}
my $status;
while ((my $w = waitpid(-1, 0)) > 0) {
    if ($w == $pid) {
        $status = $? & 127 ? 'signal-' . ($? & 127) : $? >> 8;
        last;
    }
}
finish($status // 'pid1-lost');
